package persistence

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
)

type listRow struct {
	ID                 string         `db:"id"`
	ClientMessageID    string         `db:"client_message_id"`
	Mesh               string         `db:"mesh"`
	Status             string         `db:"status"`
	Attempts           int            `db:"attempts"`
	RequestFingerprint []byte         `db:"request_fingerprint"`
	Payload            []byte         `db:"payload"`
	EnqueuedAt         int64          `db:"enqueued_at"`
	NextAttemptAt      int64          `db:"next_attempt_at"`
	DeliveredAt        sql.NullInt64  `db:"delivered_at"`
	BrokerMessageID    sql.NullString `db:"broker_message_id"`
	HistoryID          sql.NullString `db:"history_id"`
	LastError          sql.NullString `db:"last_error"`
	AbortedAt          sql.NullInt64  `db:"aborted_at"`
	AbortedBy          sql.NullString `db:"aborted_by"`
	SupersededBy       sql.NullString `db:"superseded_by"`
	Mail               sql.NullString `db:"mail"`
}

// List returns one page of rows, newest first (row ids are ULIDs), each
// with the receipts its message got.
func (o *Outbox) List(tx *Tx, q *messages.ListOutbox) (*messages.OutboxPage, error) {
	where, args := []string{"1"}, []any{}
	add := func(cond string, a ...any) { where, args = append(where, cond), append(args, a...) }
	if q.ClientMessageID != "" {
		// One row per sender that used the id, at most (the unique index).
		add("client_message_id = ?", q.ClientMessageID)
	}
	if q.Status != "" {
		add("status = ?", q.Status)
	}
	if q.Before != "" {
		add("id < ?", q.Before)
	}
	if q.Mesh != "" {
		add("mesh = ?", q.Mesh)
	}
	if q.ID != "" {
		add("id = ?", q.ID)
	}
	if q.Thread != "" {
		add("(thread_id = ? OR client_message_id = ?)", q.Thread, q.Thread)
	}
	if q.AwaitingAck {
		add(`ack_required = 1 AND status IN ('pending', 'inflight', 'done') AND enqueued_at < ?
		     AND NOT EXISTS (SELECT 1 FROM outbox_receipt r WHERE r.mesh = outbox.mesh
		                       AND r.client_message_id = outbox.client_message_id AND (r.kind = 'ack' OR r.kind = 'refused'))`,
			orNever(q.EnqueuedBefore))
	}
	var rows []listRow
	if err := tx.Select(&rows, `SELECT id, client_message_id, mesh, status, attempts, request_fingerprint, payload,
	       enqueued_at, next_attempt_at, delivered_at, broker_message_id, history_id, last_error,
	       aborted_at, aborted_by, superseded_by, mail
	  FROM outbox WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`, append(args, q.Limit+1)...); err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	page := &messages.OutboxPage{Items: make([]messages.OutboxItem, 0, len(rows))}
	if len(rows) > q.Limit {
		rows = rows[:q.Limit]
		page.Next = rows[len(rows)-1].ID
	}
	for i := range rows {
		page.Items = append(page.Items, rows[i].item())
		if q.Frames && len(rows[i].Payload) > 0 {
			page.Items[i].Frame = rows[i].Payload
		}
	}
	return page, o.addReceipts(tx, page.Items)
}

// orNever is a time bound, with 0 for none: the largest time.
func orNever(ms int64) int64 {
	if ms == 0 {
		return 1<<63 - 1
	}
	return ms
}

func (r *listRow) item() messages.OutboxItem {
	var frame struct {
		TargetSpec string `json:"targetSpec"`
	}
	_ = json.Unmarshal(r.Payload, &frame) // a payload we wrote; an unreadable one shows an empty "to"
	it := messages.OutboxItem{
		ID: r.ID, ClientMessageID: r.ClientMessageID, Mesh: r.Mesh, Status: r.Status, To: frame.TargetSpec,
		Attempts: r.Attempts, RequestFingerprint: fmt.Sprintf("%x", r.RequestFingerprint),
		EnqueuedAt: isoTime(r.EnqueuedAt), NextAttemptAt: isoTime(r.NextAttemptAt),
		DeliveredAt: nullTime(r.DeliveredAt), BrokerMessageID: nullable(r.BrokerMessageID),
		HistoryID: nullable(r.HistoryID), LastError: nullable(r.LastError), AbortedAt: nullTime(r.AbortedAt),
		AbortedBy: nullable(r.AbortedBy), SupersededBy: nullable(r.SupersededBy), PayloadBytes: len(r.Payload),
	}
	var m messages.Mail
	if r.Mail.Valid && json.Unmarshal([]byte(r.Mail.String), &m) == nil {
		it.Subject, it.ThreadID, it.ReplyToID, it.AckRequired = m.Subject, m.ThreadID, m.ReplyToID, m.AckRequired
		it.Importance = m.ImportanceOf()
	}
	return it
}

// addReceipts fills the acked_by and receipts of items from outbox_receipt.
func (o *Outbox) addReceipts(tx *Tx, items []messages.OutboxItem) error {
	if len(items) == 0 {
		return nil
	}
	keys := make([][2]string, len(items))
	at := make(map[[2]string]int, len(items))
	for i := range items {
		keys[i] = [2]string{items[i].Mesh, items[i].ClientMessageID}
		at[keys[i]] = i
	}
	keysJSON, _ := json.Marshal(keys) // strings always marshal
	var rows []struct {
		Mesh            string         `db:"mesh"`
		ClientMessageID string         `db:"client_message_id"`
		Kind            string         `db:"kind"`
		Peer            string         `db:"peer_pubkey"`
		Name            string         `db:"peer_name"`
		At              int64          `db:"at"`
		Until           sql.NullInt64  `db:"until"`
		Reason          sql.NullString `db:"reason"`
	}
	if err := tx.Select(&rows, `SELECT mesh, client_message_id, kind, peer_pubkey, peer_name, at, until, reason
	    FROM outbox_receipt WHERE (mesh, client_message_id) IN
	         (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))
	   ORDER BY at, peer_pubkey`, string(keysJSON)); err != nil {
		return fmt.Errorf("list outbox receipts: %w", err)
	}
	for _, r := range rows {
		it := &items[at[[2]string{r.Mesh, r.ClientMessageID}]]
		if r.Kind == messages.ReceiptAck {
			it.AckedBy = append(it.AckedBy, messages.Acker{Pubkey: r.Peer, Name: r.Name, At: isoTime(r.At)})
			continue
		}
		rc := messages.Receipt{Kind: r.Kind, Pubkey: r.Peer, Name: r.Name, At: isoTime(r.At), Reason: r.Reason.String}
		if r.Until.Valid {
			rc.Until = isoTime(r.Until.Int64)
		}
		it.Receipts = append(it.Receipts, rc)
	}
	return nil
}
