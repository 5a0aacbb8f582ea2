package broker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Cross-replica delivery. Several brokers on one PostgreSQL database each
// hold some of a mesh's connections. The broker that commits a message
// pushes it to the recipients connected to it; for the others it NOTIFYs,
// and every broker that holds one of their connections drains their queue
// (ClaimDeliveries with SKIP LOCKED: exactly one claimer per row). A
// notification a replica misses — its LISTEN connection lost, or dead
// without a word — is made up for by WaitingRecipients, which each replica
// polls (relay.go). On SQLite there is one broker and both calls do
// nothing.

// notifyChannel is the LISTEN/NOTIFY channel.
const notifyChannel = "claudemesh_delivery"

// maxNotifyPayload keeps each NOTIFY under PostgreSQL's 8000-byte limit.
const maxNotifyPayload = 7000

// notify announces, in tx, that these recipients have deliveries waiting:
// PostgreSQL sends the notifications with the commit or not at all. On
// SQLite it does nothing.
func (s *Store) notify(ctx context.Context, tx *sqlx.Tx, recipients []Recipient) error {
	if s.d.name != postgresName {
		return nil
	}
	for len(recipients) > 0 {
		n, payload := notifyChunk(recipients)
		if _, err := s.txExec(ctx, tx, "SELECT pg_notify($1, $2)", notifyChannel, payload); err != nil {
			return fmt.Errorf("notify deliveries: %w", err)
		}
		recipients = recipients[n:]
	}
	return nil
}

// notifyChunk encodes as many leading recipients as fit one payload.
func notifyChunk(recipients []Recipient) (int, string) {
	pairs := make([][2]string, 0, len(recipients))
	size := 2
	for _, r := range recipients {
		size += len(r.MeshID) + len(r.Pubkey) + 8
		if len(pairs) > 0 && size > maxNotifyPayload {
			break
		}
		pairs = append(pairs, [2]string{r.MeshID, r.Pubkey})
	}
	b, _ := json.Marshal(pairs)
	return len(pairs), string(b)
}

// Listen calls fn with the recipients of every notification until ctx is
// done. After it (re)connects it calls fn(nil): notifications may have been
// missed, so every local connection should drain. On SQLite it only waits
// for ctx.
func (s *Store) Listen(ctx context.Context, fn func([]Recipient)) error {
	return s.listen(ctx, notifyChannel, func() { fn(nil) }, func(payload string) {
		var pairs [][2]string
		if err := json.Unmarshal([]byte(payload), &pairs); err != nil {
			s.log.Warn("delivery_notification_malformed", "err", err)
			return
		}
		rs := make([]Recipient, len(pairs))
		for i, p := range pairs {
			rs[i] = Recipient{MeshID: p[0], Pubkey: p[1]}
		}
		fn(rs)
	})
}
