package broker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// State limits: a key's bytes, a value's bytes of compact JSON.
const (
	MaxStateKey   = messages.MaxStateKey
	MaxStateValue = messages.MaxStateValue
)

// State errors; each wraps ErrInvalid or is a conflict.
var (
	ErrInvalidStateKey    = fmt.Errorf("%w: a state key is 1-%d bytes of UTF-8 with no control characters", ErrInvalid, MaxStateKey)
	ErrInvalidStateValue  = fmt.Errorf("%w: a state value is one JSON value", ErrInvalid)
	ErrStateValueTooLarge = fmt.Errorf("%w: a state value is at most %d bytes of JSON", ErrInvalid, MaxStateValue)
	ErrInvalidIfVersion   = fmt.Errorf("%w: if_version is 0 (the key must not exist) or a version (1 or more)", ErrInvalid)
	// ErrStateConflict is a compare-and-set whose if_version is not the
	// key's version; the error is a *StateConflict.
	ErrStateConflict = errors.New("state version conflict")
)

// StateEntry is one key of a mesh's state.
type StateEntry struct {
	Key           string
	Value         json.RawMessage // compact JSON
	Version       int64
	UpdatedBy     string // the pubkey the setting connection sends with
	UpdatedByName string
	UpdatedAt     time.Time
}

// StateConflict is a refused compare-and-set: Current is the key as it is
// (nil: it does not exist).
type StateConflict struct {
	Key       string
	IfVersion int64
	Current   *StateEntry
}

func (e *StateConflict) Error() string {
	version := int64(0)
	if e.Current != nil {
		version = e.Current.Version
	}
	return fmt.Sprintf("state key %q is at version %d, not %d", e.Key, version, e.IfVersion)
}

func (e *StateConflict) Unwrap() error { return ErrStateConflict }

// StateSet is one set_state.
type StateSet struct {
	Key   string
	Value json.RawMessage
	// IfVersion makes the set a compare-and-set: nil sets whatever the
	// version, 0 only creates, N only replaces version N.
	IfVersion *int64
	// MemberID is the setting connection's member, which must be active.
	MemberID      string
	UpdatedBy     string
	UpdatedByName string
}

func (set *StateSet) validate() error {
	if messages.CheckStateKey(set.Key) != nil {
		return ErrInvalidStateKey
	}
	if set.IfVersion != nil && *set.IfVersion < 0 {
		return ErrInvalidIfVersion
	}
	value, err := messages.CompactStateValue(set.Value)
	var me *messages.Error
	switch {
	case errors.As(err, &me) && me.Code == messages.CodeStateValueTooLarge:
		return ErrStateValueTooLarge
	case err != nil:
		return ErrInvalidStateValue
	}
	set.Value = value
	return nil
}

// SetState writes the key and returns it as stored (its new version). A
// compare-and-set that does not match is a *StateConflict; invalid input
// wraps ErrInvalid; a member revoked (or unknown) is ErrMemberRevoked; in
// each case nothing is stored. On PostgreSQL the
// change is announced to the other replicas with the commit (origin is the
// announcing broker, which pushes to its own connections itself).
func (s *Store) SetState(ctx context.Context, meshID, origin string, set StateSet) (*StateEntry, error) {
	if err := set.validate(); err != nil {
		return nil, err
	}
	now := s.clock()
	// Every write is conditional on the member being active, in its own
	// statement: a revocation committed before it stores nothing.
	args := []any{meshID, set.Key, string(set.Value), set.UpdatedBy, set.UpdatedByName, s.d.time(now), set.MemberID, meshID}
	var query string
	switch {
	case set.IfVersion == nil:
		query = `INSERT INTO state (mesh_id, key, value, version, updated_by, updated_by_name, updated_at)
			SELECT ?, ?, ?, 1, ?, ?, ? WHERE ` + activeMember + ` ON CONFLICT (mesh_id, key) DO UPDATE SET value = excluded.value,
			version = state.version + 1, updated_by = excluded.updated_by, updated_by_name = excluded.updated_by_name,
			updated_at = excluded.updated_at RETURNING version`
	case *set.IfVersion == 0:
		query = `INSERT INTO state (mesh_id, key, value, version, updated_by, updated_by_name, updated_at)
			SELECT ?, ?, ?, 1, ?, ?, ? WHERE ` + activeMember + ` ON CONFLICT (mesh_id, key) DO NOTHING RETURNING version`
	default:
		query = `UPDATE state SET value = ?, version = version + 1, updated_by = ?, updated_by_name = ?, updated_at = ?
			WHERE mesh_id = ? AND key = ? AND version = ? AND ` + activeMember + ` RETURNING version`
		args = []any{string(set.Value), set.UpdatedBy, set.UpdatedByName, s.d.time(now), meshID, set.Key, *set.IfVersion,
			set.MemberID, meshID}
	}
	entry := &StateEntry{Key: set.Key, Value: set.Value, UpdatedBy: set.UpdatedBy, UpdatedByName: set.UpdatedByName, UpdatedAt: now}
	matched := false
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var versions []int64
		if err := s.txSelect(ctx, tx, &versions, s.d.rewrite(query), args...); err != nil {
			return err
		}
		if matched = len(versions) == 1; !matched {
			return nil
		}
		entry.Version = versions[0]
		return s.notifyState(ctx, tx, meshID, origin, entry)
	})
	if err != nil {
		return nil, fmt.Errorf("set state: %w", err)
	}
	if !matched {
		if err := s.memberActive(ctx, meshID, set.MemberID); err != nil {
			return nil, fmt.Errorf("set state: %w", err)
		}
		current, err := s.State(ctx, meshID, set.Key)
		if err != nil && !errors.Is(err, ErrStateNotFound) {
			return nil, err
		}
		return nil, &StateConflict{Key: set.Key, IfVersion: *set.IfVersion, Current: current}
	}
	return entry, nil
}

// ErrStateNotFound means the mesh's state has no such key.
var ErrStateNotFound = errors.New("state key not found")

const stateSelect = `SELECT key, value, version, updated_by, updated_by_name, updated_at FROM state`

func scanState(row interface{ Scan(...any) error }) (*StateEntry, error) {
	var e StateEntry
	var value string
	if err := row.Scan(&e.Key, &value, &e.Version, &e.UpdatedBy, &e.UpdatedByName, (*dbTime)(&e.UpdatedAt)); err != nil {
		return nil, err
	}
	e.Value = json.RawMessage(value)
	return &e, nil
}

// State returns the key of the mesh's state, or ErrStateNotFound.
func (s *Store) State(ctx context.Context, meshID, key string) (*StateEntry, error) {
	e, err := scanState(s.rdb.QueryRowxContext(ctx, s.d.rewrite(stateSelect+` WHERE mesh_id = ? AND key = ?`), meshID, key))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, ErrStateNotFound
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	}
	return e, nil
}

// States lists the mesh's state by key.
func (s *Store) States(ctx context.Context, meshID string) ([]StateEntry, error) {
	entries, err := queryAll(ctx, s, scanState, stateSelect+` WHERE mesh_id = ? ORDER BY key`, meshID)
	if err != nil {
		return nil, fmt.Errorf("list state: %w", err)
	}
	return entries, nil
}
