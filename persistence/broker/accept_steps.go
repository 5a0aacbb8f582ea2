package broker

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
)

// maxParams bounds the parameters of one multi-row statement (SQLite
// allows 32766, PostgreSQL 65535); longer row lists are split.
const maxParams = 8000

// dedupeKey is a dedupe primary key.
type dedupeKey struct{ meshID, senderPubkey, clientMessageID string }

func (r *AcceptRequest) key() dedupeKey {
	return dedupeKey{r.MeshID, r.SenderPubkey, r.ClientMessageID}
}

// memberKey is a member of a mesh.
type memberKey struct{ meshID, pubkey string }

// idKey is a client_message_id in a mesh, whoever sent it.
type idKey struct{ meshID, clientMessageID string }

// accept runs steps 2–6 of spec §4.9.4 for the requests idx of b, whose
// keys are distinct, with one multi-row statement per step:
//
//	B2     read the meshes and the active members among the DM recipients
//	old    while rows of unknown sender are left (from before migration
//	       0005), find the ids that have one: those are taken
//	claim  INSERT the dedupe rows of the other requests that passed B2,
//	       ON CONFLICT DO NOTHING, RETURNING the keys that were free
//	answer read the rows holding the other keys (FOR SHARE on PostgreSQL):
//	       Duplicate or Conflict; a B2 failure with no row is Rejected
//	write  INSERT the message, history and delivery rows of the claimed
//
// It writes nothing for a request it does not create, so rejections and
// duplicates need no rollback. An error leaves b's results undefined and
// the transaction (or savepoint) must be rolled back.
func (s *Store) accept(ctx context.Context, tx *sqlx.Tx, b *batch, idx []int) error {
	var valid []int
	for _, i := range idx {
		if err := b.reqs[i].validate(); err != nil {
			b.results[i] = AcceptResult{Outcome: Rejected, Err: err}
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return nil
	}
	expiry, err := s.dedupeExpiry(ctx, tx, b, valid)
	if err != nil {
		return fmt.Errorf("read meshes: %w", err)
	}
	pass, rejected, err := s.checkB2(ctx, tx, b, valid, expiry)
	if err != nil {
		return fmt.Errorf("B2 check: %w", err)
	}
	unknown, err := s.unknownSenderRows(ctx, tx, b, valid)
	if err != nil {
		return fmt.Errorf("read dedupe rows of unknown sender: %w", err)
	}
	free := slices.DeleteFunc(slices.Clone(pass), func(i int) bool { return unknown[i] })
	brokerIDs, claimed, err := s.claim(ctx, tx, b, free, expiry)
	if err != nil {
		return fmt.Errorf("insert dedupe rows: %w", err)
	}
	var created, taken []int
	for _, i := range pass {
		if claimed[b.reqs[i].key()] {
			created = append(created, i)
		} else {
			taken = append(taken, i)
		}
	}
	if err := s.answer(ctx, tx, b, append(taken, keysOf(rejected)...), rejected, unknown); err != nil {
		return fmt.Errorf("read dedupe rows: %w", err)
	}
	return s.write(ctx, tx, b, created, brokerIDs)
}

func keysOf(m map[int]*messages.Error) []int {
	out := make([]int, 0, len(m))
	for i := range m {
		out = append(out, i)
	}
	return out
}

// checkB2 is step 5: the destination must exist. The mesh must exist (it
// has an entry in expiry), and every recipient of a DM must be an active
// member of it, or a session key of one — mapped by the hub
// (SessionMembers), else a session that counts in mesh_session; other
// kinds have no check yet.
func (s *Store) checkB2(ctx context.Context, tx *sqlx.Tx, b *batch, idx []int, expiry map[string]*time.Time) (
	pass []int, rejected map[int]*messages.Error, err error) {
	var pubkeys []string
	for _, i := range idx {
		if b.reqs[i].DestinationKind == KindDM {
			for _, p := range b.reqs[i].Recipients {
				pubkeys = append(pubkeys, b.reqs[i].memberOf(p))
			}
		}
	}
	active := map[memberKey]bool{}
	if len(pubkeys) > 0 {
		var rows []struct {
			MeshID string `db:"mesh_id"`
			Pubkey string `db:"pubkey"`
		}
		if err := s.txSelect(ctx, tx, &rows, s.d.rewrite(`SELECT mesh_id, pubkey FROM member
			 WHERE revoked_at IS NULL AND pubkey IN (SELECT value FROM EACH(?))`), jsonArray(pubkeys)); err != nil {
			return nil, nil, err
		}
		for _, r := range rows {
			active[memberKey{r.MeshID, r.Pubkey}] = true
		}
	}
	if missed := unknownRecipients(b, idx, active); len(missed) > 0 {
		if err := s.countingSessions(ctx, tx, missed, b.now, active); err != nil {
			return nil, nil, err
		}
	}
	rejected = map[int]*messages.Error{}
	for _, i := range idx {
		r := b.reqs[i]
		if _, ok := expiry[r.MeshID]; !ok {
			rejected[i] = &messages.Error{Status: http.StatusNotFound, Code: CodeUnknownMesh, Detail: "no mesh with id " + r.MeshID}
			continue
		}
		if r.DestinationKind == KindDM && !allActive(active, r) {
			rejected[i] = &messages.Error{Status: http.StatusNotFound, Code: CodeUnknownRecipient,
				Detail: "the recipient " + r.DestinationRef + " is neither an active member of this mesh nor a connected session of one"}
			continue
		}
		pass = append(pass, i)
	}
	return pass, rejected, nil
}

// unknownRecipients are the DM recipients of the requests idx that are
// neither a session key the hub mapped to its member nor an active
// member: a session connected to another replica, or no one. Only these
// cost the accept a look at the sessions table.
func unknownRecipients(b *batch, idx []int, active map[memberKey]bool) []memberKey {
	var out []memberKey
	for _, i := range idx {
		r := b.reqs[i]
		if r.DestinationKind != KindDM {
			continue
		}
		for _, p := range r.Recipients {
			k := memberKey{r.MeshID, p}
			if _, mapped := r.SessionMembers[p]; !mapped && !active[k] && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

func allActive(active map[memberKey]bool, r *AcceptRequest) bool {
	for _, p := range r.Recipients {
		if !active[memberKey{r.MeshID, r.memberOf(p)}] {
			return false
		}
	}
	return len(r.Recipients) > 0
}

// memberOf is the member B2 checks for recipient p: the member of a
// session key, else p itself.
func (r *AcceptRequest) memberOf(p string) string {
	if m, ok := r.SessionMembers[p]; ok {
		return m
	}
	return p
}

// claim is step 2: insert a dedupe row per request, each with a fresh
// broker_message_id; it returns those ids and the keys that were free.
func (s *Store) claim(ctx context.Context, tx *sqlx.Tx, b *batch, idx []int, expiry map[string]*time.Time) (
	map[int]string, map[dedupeKey]bool, error) {
	brokerIDs := make(map[int]string, len(idx))
	rows := make([][]any, 0, len(idx))
	for _, i := range idx {
		r := b.reqs[i]
		brokerIDs[i] = ulid.MustNew(ulid.Timestamp(b.now), s.messageIDs).String() // created_at's time: retention finds old messages by id
		rows = append(rows, []any{r.MeshID, r.SenderPubkey, r.ClientMessageID, brokerIDs[i], r.RequestFingerprint[:],
			r.DestinationKind, r.DestinationRef, s.d.time(b.now), s.d.timeOrNull(expiry[r.MeshID])})
	}
	claimed := make(map[dedupeKey]bool, len(idx))
	err := rowChunks("(?, ?, ?, ?, ?, ?, ?, ?, ?, TRUE)", rows, func(values string, args []any) error {
		var keys []struct {
			MeshID          string `db:"mesh_id"`
			SenderPubkey    string `db:"sender_pubkey"`
			ClientMessageID string `db:"client_message_id"`
		}
		err := s.txSelect(ctx, tx, &keys, s.d.rewrite(`INSERT INTO client_message_dedupe (mesh_id, sender_pubkey,
			client_message_id, broker_message_id, request_fingerprint, destination_kind, destination_ref,
			first_seen_at, expires_at, history_available) VALUES `+values+`
			ON CONFLICT (mesh_id, sender_pubkey, client_message_id) DO NOTHING
			RETURNING mesh_id, sender_pubkey, client_message_id`), args...)
		for _, k := range keys {
			claimed[dedupeKey{k.MeshID, k.SenderPubkey, k.ClientMessageID}] = true
		}
		return err
	})
	return brokerIDs, claimed, err
}

// dedupeExpiry returns, per existing mesh of the requests, the expires_at
// of a dedupe row first seen now: now + dedupe_retention_days, or nil for
// a permanent mesh.
func (s *Store) dedupeExpiry(ctx context.Context, tx *sqlx.Tx, b *batch, idx []int) (map[string]*time.Time, error) {
	expiry := map[string]*time.Time{}
	put := func(id string, m meshDedupe) {
		expiry[id] = nil
		if m.Mode != DedupePermanent {
			t := b.now.AddDate(0, 0, m.Days)
			expiry[id] = &t
		}
	}
	var missing []string
	for _, i := range idx {
		id := b.reqs[i].MeshID
		if _, done := expiry[id]; done || slices.Contains(missing, id) {
			continue
		}
		if m, ok := s.dedupeOf.Load(id); ok {
			put(id, m.(meshDedupe))
		} else {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return expiry, nil
	}
	var meshes []struct {
		ID string `db:"id"`
		meshDedupe
	}
	if err := s.txSelect(ctx, tx, &meshes, s.d.rewrite(`SELECT id, dedupe_mode, dedupe_retention_days FROM mesh
		 WHERE id IN (SELECT value FROM EACH(?))`), jsonArray(missing)); err != nil {
		return nil, err
	}
	for _, m := range meshes {
		s.dedupeOf.Store(m.ID, m.meshDedupe)
		put(m.ID, m.meshDedupe)
	}
	return expiry, nil
}

// meshDedupe is a mesh's dedupe settings.
type meshDedupe struct {
	Mode string `db:"dedupe_mode"`
	Days int    `db:"dedupe_retention_days"`
}

// unknownSenderRows returns which of the requests idx have a dedupe row of
// unknown sender (from before migration 0005): such a row holds its id for
// every sender of the mesh, so the request is answered from it and claims
// nothing. It reads only while the store found such rows at open.
func (s *Store) unknownSenderRows(ctx context.Context, tx *sqlx.Tx, b *batch, idx []int) (map[int]bool, error) {
	if !s.unknownSenders || len(idx) == 0 {
		return nil, nil
	}
	rows := make([][]any, len(idx))
	for n, i := range idx {
		rows[n] = []any{b.reqs[i].MeshID, b.reqs[i].ClientMessageID}
	}
	found := map[idKey]bool{}
	err := rowChunks("(?, ?)", rows, func(values string, args []any) error {
		var keys []struct {
			MeshID          string `db:"mesh_id"`
			ClientMessageID string `db:"client_message_id"`
		}
		err := s.txSelect(ctx, tx, &keys, s.d.rewrite(`SELECT d.mesh_id, d.client_message_id FROM client_message_dedupe d
			 WHERE d.sender_pubkey = '' AND (d.mesh_id, d.client_message_id) IN (VALUES `+values+`) /*FOR SHARE*/`), args...)
		for _, k := range keys {
			found[idKey{k.MeshID, k.ClientMessageID}] = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	unknown := map[int]bool{}
	for _, i := range idx {
		if found[idKey{b.reqs[i].MeshID, b.reqs[i].ClientMessageID}] {
			unknown[i] = true
		}
	}
	return unknown, nil
}

// answer is steps 3–4 for the requests whose key is taken, and the B2
// verdict for those that failed it: a stored row answers Duplicate or
// Conflict (claim precedes B2); no row means Rejected. The row of a
// request in unknown is its id's row of unknown sender.
func (s *Store) answer(ctx context.Context, tx *sqlx.Tx, b *batch, idx []int, rejected map[int]*messages.Error,
	unknown map[int]bool) error {
	if len(idx) == 0 {
		return nil
	}
	keyOf := func(i int) dedupeKey {
		k := b.reqs[i].key()
		if unknown[i] {
			k.senderPubkey = ""
		}
		return k
	}
	rows := make([][]any, len(idx))
	for n, i := range idx {
		k := keyOf(i)
		rows[n] = []any{k.meshID, k.senderPubkey, k.clientMessageID}
	}
	stored := map[dedupeKey]*DedupeRow{}
	err := rowChunks("(?, ?, ?)", rows, func(values string, args []any) error {
		rs, err := s.txQuery(ctx, tx, s.d.rewrite(dedupeSelect+
			" WHERE (d.mesh_id, d.sender_pubkey, d.client_message_id) IN (VALUES "+values+") /*FOR SHARE*/"), args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			row, err := scanDedupe(rs)
			if err != nil {
				return err
			}
			stored[dedupeKey{row.MeshID, row.SenderPubkey, row.ClientMessageID}] = row
		}
		return rs.Err()
	})
	if err != nil {
		return err
	}
	for _, i := range idx {
		row, rej := stored[keyOf(i)], rejected[i]
		switch {
		case row != nil:
			b.results[i] = row.Answer(b.reqs[i].RequestFingerprint)
		case rej != nil:
			b.results[i] = AcceptResult{Outcome: Rejected, Err: rej}
		default:
			return fmt.Errorf("the row holding client_message_id %s vanished", b.reqs[i].ClientMessageID)
		}
	}
	return nil
}

// write is step 6 for the claimed requests: message, history and one
// delivery row per recipient.
func (s *Store) write(ctx context.Context, tx *sqlx.Tx, b *batch, idx []int, brokerIDs map[int]string) error {
	if len(idx) == 0 {
		return nil
	}
	now := s.d.time(b.now)
	var msgs, hist, deliveries [][]any
	historyIDs := make(map[int]string, len(idx))
	for _, i := range idx {
		r, id := b.reqs[i], brokerIDs[i]
		historyIDs[i] = ulid.Make().String()
		msgs = append(msgs, []any{id, r.MeshID, r.ClientMessageID, r.RequestFingerprint[:], r.SenderPubkey,
			nullString(cut(r.SenderName, MaxSessionText)), r.TargetSpec, r.Priority, r.Nonce, r.Ciphertext,
			nullString(r.ReplyToID), nullString(string(r.Meta)), now})
		hist = append(hist, []any{historyIDs[i], r.MeshID, id, now})
		leaseUntil := s.d.time(b.now.Add(r.Lease).Truncate(time.Millisecond))
		for _, p := range r.Recipients {
			if slices.Contains(r.Online, p) {
				deliveries = append(deliveries, []any{r.MeshID, id, p, now, leaseUntil, 1})
			} else {
				deliveries = append(deliveries, []any{r.MeshID, id, p, now, nil, 0})
			}
		}
	}
	for _, ins := range []struct {
		what, prefix string
		rows         [][]any
	}{
		{"message", `INSERT INTO message (id, mesh_id, client_message_id, request_fingerprint, sender_pubkey, sender_name,
			target_spec, priority, nonce, ciphertext, reply_to_id, meta, created_at) VALUES `, msgs},
		{"history", "INSERT INTO message_history (history_id, mesh_id, message_id, created_at) VALUES ", hist},
		{"delivery", `INSERT INTO delivery_queue (mesh_id, message_id, recipient_pubkey, created_at,
			lease_expires_at, attempts) VALUES `, deliveries},
	} {
		if len(ins.rows) == 0 {
			continue
		}
		err := rowChunks(placeholders(len(ins.rows[0])), ins.rows, func(values string, args []any) error {
			_, err := s.txExec(ctx, tx, s.d.rewrite(ins.prefix+values), args...)
			return err
		})
		if err != nil {
			return fmt.Errorf("insert %s rows: %w", ins.what, err)
		}
	}
	for _, i := range idx {
		b.results[i] = AcceptResult{Outcome: Created, BrokerMessageID: brokerIDs[i], HistoryID: historyIDs[i],
			HistoryAvailable: true, FirstSeenAt: b.now}
	}
	return nil
}

func placeholders(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// rowChunks calls fn with the VALUES list and arguments of successive
// chunks of rows, each row rendered with tmpl (one `?` per row element).
func rowChunks(tmpl string, rows [][]any, fn func(values string, args []any) error) error {
	if len(rows) == 0 {
		return nil
	}
	per := max(1, maxParams/len(rows[0]))
	for start := 0; start < len(rows); start += per {
		chunk := rows[start:min(start+per, len(rows))]
		var values strings.Builder
		args := make([]any, 0, len(chunk)*len(rows[0]))
		for n, r := range chunk {
			if n > 0 {
				values.WriteString(", ")
			}
			values.WriteString(tmpl)
			args = append(args, r...)
		}
		if err := fn(values.String(), args); err != nil {
			return err
		}
	}
	return nil
}
