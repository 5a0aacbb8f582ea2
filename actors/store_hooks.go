package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// The store's commands on hooks.db (store_commands.go), for the hooks
// worker (hooks.go). They run in hooks.db's transaction of the batch, like
// every command, and none waits for an fsync.

// errNoHooksDB fails a hook command of a store opened without hooks.db.
var errNoHooksDB = errors.New("the store has no hooks.db")

func (s *Store) claimHooks(tx *persistence.Tx, m *messages.ClaimHooks, _ *actor.PID) (*messages.HooksClaimed, error) {
	return s.hooks.Claim(tx, m)
}

func (s *Store) finishHooks(tx *persistence.Tx, m *messages.FinishHooks, _ *actor.PID) (*messages.HooksFinished, error) {
	n, err := s.hooks.Finish(tx, m)
	return &messages.HooksFinished{Rows: n}, err
}

func (s *Store) hookStats(tx *persistence.Tx, _ *messages.HookStats, _ *actor.PID) (*messages.HookCounts, error) {
	return s.hooks.Stats(tx)
}

func (s *Store) pruneHooks(tx *persistence.Tx, m *messages.PruneHooks, _ *actor.PID) (*messages.HooksPruned, error) {
	n, err := s.hooks.Prune(tx, m.Before, m.Limit)
	return &messages.HooksPruned{Rows: n}, err
}
