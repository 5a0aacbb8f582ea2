package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"
)

// retentionChunk bounds the rows one retention transaction touches, so a
// sweep never holds the SQLite writer (or PostgreSQL row locks) for long.
const retentionChunk = 1000

// SweepDedupe deletes the dedupe rows whose expires_at is before now (the
// nightly job of spec §4.9.1) and returns how many it deleted. Rows of
// permanent meshes (expires_at NULL) are never deleted. After the sweep the
// id is free again for its sender.
func (s *Store) SweepDedupe(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, s.d.rewrite(`DELETE FROM client_message_dedupe
			 WHERE (mesh_id, sender_pubkey, client_message_id) IN (
			       SELECT mesh_id, sender_pubkey, client_message_id FROM client_message_dedupe
			        WHERE expires_at IS NOT NULL AND expires_at < ? LIMIT ?)`), s.d.time(now), retentionChunk)
		if err != nil {
			return total, fmt.Errorf("sweep dedupe rows: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("sweep dedupe rows: %w", err)
		}
		total += n
		if n < retentionChunk {
			return total, nil
		}
	}
}

// PruneMessages hard-deletes the messages created before olderThan with
// their history and delivery rows (delivered or not), and in the same
// transaction flips history_available to false on their dedupe rows, so a
// retry still gets `200 duplicate` with history_available false. It
// returns how many messages it deleted.
func (s *Store) PruneMessages(ctx context.Context, olderThan time.Time) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.inTx(ctx, func(tx *sqlx.Tx) (err error) {
			n, err = s.pruneChunk(ctx, tx, olderThan)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("prune messages: %w", err)
		}
		total += n
		if n < retentionChunk {
			return total, nil
		}
	}
}

// pruneChunk prunes up to retentionChunk messages created before
// olderThan. It finds them by id, through the primary key: a message's id
// is a ULID of its created_at (claim), so the ids below the smallest ULID
// of olderThan's millisecond (rounded up) are those created before it, and
// created_at needs no index of its own (one page fewer at every accept).
func (s *Store) pruneChunk(ctx context.Context, tx *sqlx.Tx, olderThan time.Time) (int64, error) {
	ms := olderThan.UnixMilli()
	if olderThan.After(time.UnixMilli(ms)) {
		ms++
	}
	var bound ulid.ULID
	if err := bound.SetTime(uint64(max(ms, 0))); err != nil {
		return 0, err
	}
	var ids []string
	if err := tx.SelectContext(ctx, &ids, s.d.rewrite(`SELECT id FROM message WHERE id < ?
		 ORDER BY id LIMIT ? /*FOR UPDATE*/`), bound.String(), retentionChunk); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	idSet := jsonArray(ids)
	if _, err := tx.ExecContext(ctx, s.d.rewrite(`UPDATE client_message_dedupe SET history_available = FALSE
		 WHERE (mesh_id, sender_pubkey, client_message_id) IN (
		       SELECT mesh_id, sender_pubkey, client_message_id FROM message WHERE id IN (SELECT value FROM EACH(?)))
		   AND broker_message_id IN (SELECT value FROM EACH(?))`), idSet, idSet); err != nil {
		return 0, fmt.Errorf("flip history_available: %w", err)
	}
	// History and delivery rows go with the message (ON DELETE CASCADE).
	res, err := tx.ExecContext(ctx, s.d.rewrite(`DELETE FROM message WHERE id IN (SELECT value FROM EACH(?))`), idSet)
	if err != nil {
		return 0, fmt.Errorf("delete messages: %w", err)
	}
	return res.RowsAffected()
}

// Orphans is the result of the integrity check of spec §4.9.6.
type Orphans struct {
	// Dedupe counts dedupe rows with neither a message row nor
	// history_available = false: an accept that was not atomic, or a
	// message deleted without the flip. Expected zero.
	Dedupe int64
	// History counts history rows whose dedupe row is gone. Zero unless
	// messages outlive the dedupe retention (the ALT check of §4.9.6).
	History int64
}

// OrphanCheck counts the rows that break the accept's atomicity.
func (s *Store) OrphanCheck(ctx context.Context) (Orphans, error) {
	var o Orphans
	err := s.rdb.QueryRowxContext(ctx, `SELECT
		(SELECT COUNT(*) FROM client_message_dedupe d
		  WHERE d.history_available = TRUE
		    AND NOT EXISTS (SELECT 1 FROM message m WHERE m.id = d.broker_message_id)),
		(SELECT COUNT(*) FROM message_history h JOIN message m ON m.id = h.message_id
		  WHERE NOT EXISTS (SELECT 1 FROM client_message_dedupe d
		                     WHERE d.mesh_id = m.mesh_id AND d.sender_pubkey = m.sender_pubkey
		                       AND d.client_message_id = m.client_message_id AND d.broker_message_id = m.id))`).Scan(&o.Dedupe, &o.History)
	if err != nil {
		return Orphans{}, fmt.Errorf("orphan check: %w", err)
	}
	return o, nil
}
