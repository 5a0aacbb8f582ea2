package persistence

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/claudemesh/claudemesh-go/messages"
)

// RecordReceipt records what a recipient said of the message of outbox
// row (r.Mesh, r.ClientMessageID), once: a receipt pushed again inserts
// nothing. A receipt for a row the mesh does not have is dropped, and so
// is one for a direct message from any key but its recipient's (only the
// recipient of a DM can acknowledge it; a topic's members all can). A row
// whose payload retention emptied no longer says its recipient and takes
// the receipt. It returns whether the receipt was new, with the row's
// subject and thread.
func (o *Outbox) RecordReceipt(tx *Tx, r *messages.RecordReceipt) (*messages.ReceiptRecorded, error) {
	var until, reason any
	if r.Until != 0 {
		until = r.Until
	}
	if r.Reason != "" {
		reason = r.Reason
	}
	n, err := affected(tx.Exec(`INSERT INTO outbox_receipt (mesh, client_message_id, kind, peer_pubkey, peer_name, at, until, reason)
		SELECT o.mesh, o.client_message_id, ?3, ?4, ?5, ?6, ?7, ?8 FROM outbox o
		 WHERE o.mesh = ?1 AND o.client_message_id = ?2
		   AND (length(o.payload) = 0 OR substr(json_extract(CAST(o.payload AS TEXT), '$.targetSpec'), 1, 1) IN ('#', '@', '*')
		        OR json_extract(CAST(o.payload AS TEXT), '$.targetSpec') = ?4)
		ON CONFLICT (mesh, client_message_id, kind, peer_pubkey) DO NOTHING`,
		r.Mesh, r.ClientMessageID, r.Kind, r.Peer, r.PeerName, r.At, until, reason))
	if err != nil {
		return nil, fmt.Errorf("record receipt: %w", err)
	}
	out := &messages.ReceiptRecorded{Inserted: n == 1}
	if !out.Inserted {
		return out, nil
	}
	var mail sql.NullString
	if err := tx.Get(&mail, `SELECT mail FROM outbox WHERE mesh = ? AND client_message_id = ?`, r.Mesh, r.ClientMessageID); err != nil &&
		!errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("record receipt: %w", err)
	}
	var m messages.Mail
	if mail.Valid && json.Unmarshal([]byte(mail.String), &m) == nil {
		out.Subject, out.ThreadID = m.Subject, m.ThreadID
	}
	return out, nil
}
