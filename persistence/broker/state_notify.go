package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Cross-replica state changes. The broker that commits a set_state pushes
// state_change to its own connections of the mesh; on PostgreSQL it also
// NOTIFYs, with the commit, and every other broker pushes it to its
// connections of the mesh. A value too large for a notification is read
// back by the listener; when the key has moved on meanwhile the change is
// skipped (the newer one's notification follows). On SQLite there is one
// broker and both calls do nothing.

// stateChannel is the LISTEN/NOTIFY channel of state changes.
const stateChannel = "claudemesh_state"

// StateChange is a set_state committed by the broker Origin.
type StateChange struct {
	MeshID string
	Origin string
	Entry  *StateEntry
}

// stateNotification is a StateChange as a notification's payload.
type stateNotification struct {
	MeshID  string          `json:"m"`
	Origin  string          `json:"o"`
	Key     string          `json:"k"`
	Version int64           `json:"v"`
	By      string          `json:"b"`
	Name    string          `json:"n"`
	At      int64           `json:"t"`
	Value   json.RawMessage `json:"x,omitempty"` // absent: read it back
}

func (s *Store) notifyState(ctx context.Context, tx *sqlx.Tx, meshID, origin string, e *StateEntry) error {
	if s.d.name != postgresName {
		return nil
	}
	n := stateNotification{MeshID: meshID, Origin: origin, Key: e.Key, Version: e.Version, By: e.UpdatedBy,
		Name: e.UpdatedByName, At: e.UpdatedAt.UnixMilli(), Value: e.Value}
	payload, _ := json.Marshal(&n) // plain strings and valid JSON always marshal
	if len(payload) > maxNotifyPayload {
		n.Value = nil
		payload, _ = json.Marshal(&n)
	}
	if _, err := s.txExec(ctx, tx, "SELECT pg_notify($1, $2)", stateChannel, string(payload)); err != nil {
		return fmt.Errorf("notify state change: %w", err)
	}
	return nil
}

// ListenState calls fn with every state change another broker commits
// until ctx is done, and connected each time it starts listening (changes
// committed while it was not are not heard). On SQLite it only waits for
// ctx.
func (s *Store) ListenState(ctx context.Context, connected func(), fn func(*StateChange)) error {
	return listenJSON(ctx, s, stateChannel, "state", connected, func(n *stateNotification) {
		e := &StateEntry{Key: n.Key, Value: n.Value, Version: n.Version, UpdatedBy: n.By, UpdatedByName: n.Name,
			UpdatedAt: time.UnixMilli(n.At).UTC()}
		if e.Value == nil {
			current, err := s.State(ctx, n.MeshID, n.Key)
			if err != nil || current.Version != n.Version {
				return // gone or moved on: the newer change is announced too
			}
			e = current
		}
		fn(&StateChange{MeshID: n.MeshID, Origin: n.Origin, Entry: e})
	})
}
