// Package ipc is the client of the daemon's local API (served by package
// ipcserver), its methods grouped by feature (client_<feature>.go), over
// the daemon's Unix socket, as the daemon or as one of its agent sessions.
// It names which daemon answered (ours, or the upstream TypeScript daemon,
// whose /v1/version has no pid) and asks it only for what its ipc_features
// offer.
//
// It links nothing of the daemon (no actors, no SQLite, no metrics), so
// that short-lived processes — the CLI, `claudemesh mcp` — start fast.
package ipc
