package config

import "path/filepath"

// The agent-hook outbox's files inside DaemonDir (spec/hook-outbox.md).
// `claudemesh hook` writes the first and third and sends to the second;
// the daemon owns all three while it runs.
//
//   - hooks.db: the hook outbox, a SQLite file the receiver writes directly
//     because the daemon may not be running.
//   - hooks.wake: a Unix datagram socket the daemon listens on; a receiver
//     sends it one byte after its insert so that the worker wakes before
//     its next tick (best effort, never waited for).
//   - hooks.errors: one line per receiver that could not write hooks.db,
//     appended by the receiver and counted by the daemon (GET /v1/health).
func (p Paths) HooksDB() string    { return filepath.Join(p.DaemonDir, "hooks.db") }
func (p Paths) HookWake() string   { return filepath.Join(p.DaemonDir, "hooks.wake") }
func (p Paths) HookErrors() string { return filepath.Join(p.DaemonDir, "hooks.errors") }
