package broker

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// Cross-replica lock releases. The broker that commits a release tells
// its own connections of the mesh (their parked acquires try again at
// once); on PostgreSQL it also NOTIFYs, with the commit, and every other
// broker tells its connections. A release missed while a listener is down
// costs its waiters no more than their next try (at the holder's expiry,
// or within a second). On SQLite there is one broker and both calls do
// nothing.

// lockChannel is the LISTEN/NOTIFY channel of lock releases.
const lockChannel = "claudemesh_lock"

// LockReleased is a release committed by the broker Origin.
type LockReleased struct {
	MeshID string `json:"m"`
	Origin string `json:"o"`
	Repo   string `json:"r,omitempty"`
	Key    string `json:"k"`
}

// notifyLockReleased NOTIFYs r (keys and ids keep it far under the
// payload limit).
func (s *Store) notifyLockReleased(ctx context.Context, tx *sqlx.Tx, r *LockReleased) error {
	return s.notifyJSON(ctx, tx, lockChannel, "lock release", r)
}

// ListenLocks calls fn with every lock release a broker commits until ctx
// is done, and connected each time it starts listening. On SQLite it only
// waits for ctx.
func (s *Store) ListenLocks(ctx context.Context, connected func(), fn func(*LockReleased)) error {
	return listenJSON(ctx, s, lockChannel, "lock", connected, fn)
}
