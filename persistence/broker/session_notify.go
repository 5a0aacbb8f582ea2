package broker

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// Cross-replica session takeovers (ConnectSession): a session key that
// connects while another connection holds its row live takes the row
// over, and on PostgreSQL the broker that committed it NOTIFYs the
// connection it took the row from; the broker holding that connection
// closes it, as a hub closes the older of two connections of one key of
// its own.

// sessionChannel is the LISTEN/NOTIFY channel of session takeovers.
const sessionChannel = "claudemesh_session"

// SessionTaken names the connection (the replica and its id there) that
// held a session's row until another connection of the key took it over.
type SessionTaken struct {
	MeshID        string `json:"m" db:"mesh_id"`
	SessionPubkey string `json:"s" db:"session_pubkey"`
	Replica       string `json:"r" db:"replica"`
	ConnID        string `json:"c" db:"conn_id"`
}

func (s *Store) notifySessionTaken(ctx context.Context, tx *sqlx.Tx, t *SessionTaken) error {
	return s.notifyJSON(ctx, tx, sessionChannel, "session takeover", t)
}

// ListenSessions calls fn with every session takeover a broker commits
// until ctx is done, and connected each time it starts listening. On
// SQLite (one broker, whose hub sees every connection) it only waits for
// ctx.
func (s *Store) ListenSessions(ctx context.Context, connected func(), fn func(*SessionTaken)) error {
	return listenJSON(ctx, s, sessionChannel, "session", connected, fn)
}
