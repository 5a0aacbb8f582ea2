// Package config resolves where claudemesh keeps its files and reads and
// writes the small ones: the mesh memberships in config.json (the upstream
// CLI's format) and the daemon's local-token. It never opens a database.
//
// Every file it writes goes through a temp file and rename, so a crash never
// leaves half a file; directories are 0700 and secrets 0600.
package config

import (
	"fmt"
	"os"
	"path/filepath"
)

// Environment overrides.
const (
	EnvDaemonDir = "CLAUDEMESH_DAEMON_DIR"
	EnvConfigDir = "CLAUDEMESH_CONFIG_DIR"
	// EnvCPUProfile names a file a claudemesh process writes its CPU
	// profile to, from its start to its exit (a daemon or broker stopped
	// by SIGTERM): `claudemesh bench --profile DIR` sets it for each
	// process it starts. Read one with `go tool pprof`.
	EnvCPUProfile = "CLAUDEMESH_CPU_PROFILE"
)

// Paths are the two directories claudemesh uses.
type Paths struct {
	// DaemonDir holds the daemon's runtime files (default ~/.claudemesh/daemon).
	DaemonDir string
	// ConfigDir holds config.json (default ~/.claudemesh).
	ConfigDir string
}

// ResolvePaths reads the environment overrides and falls back to the home
// directory.
func ResolvePaths() (Paths, error) {
	p := Paths{DaemonDir: os.Getenv(EnvDaemonDir), ConfigDir: os.Getenv(EnvConfigDir)}
	if p.DaemonDir == "" || p.ConfigDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Paths{}, fmt.Errorf("find home directory (set %s and %s): %w", EnvDaemonDir, EnvConfigDir, err)
		}
		if p.ConfigDir == "" {
			p.ConfigDir = filepath.Join(home, ".claudemesh")
		}
		if p.DaemonDir == "" {
			p.DaemonDir = filepath.Join(home, ".claudemesh", "daemon")
		}
	}
	return p, nil
}

// Files inside DaemonDir.
func (p Paths) Socket() string    { return filepath.Join(p.DaemonDir, "daemon.sock") }
func (p Paths) PidFile() string   { return filepath.Join(p.DaemonDir, "daemon.pid") }
func (p Paths) TokenFile() string { return filepath.Join(p.DaemonDir, "local-token") }
func (p Paths) HTTPPort() string  { return filepath.Join(p.DaemonDir, "http.port") }
func (p Paths) OutboxDB() string  { return filepath.Join(p.DaemonDir, "outbox.db") }
func (p Paths) InboxDB() string   { return filepath.Join(p.DaemonDir, "inbox.db") }
func (p Paths) LogFile() string   { return filepath.Join(p.DaemonDir, "daemon.log") }

// WebSignedIn is the web view's list of signed-in browsers inside
// DaemonDir (each sign-in's nonce, not its cookie).
func (p Paths) WebSignedIn() string { return filepath.Join(p.DaemonDir, "web-signed-in.json") }

// ConfigFile is config.json inside ConfigDir.
func (p Paths) ConfigFile() string { return filepath.Join(p.ConfigDir, "config.json") }

// EnsureDaemonDir creates DaemonDir with mode 0700, and tightens an existing
// one that is group- or world-accessible.
func (p Paths) EnsureDaemonDir() error {
	if err := os.MkdirAll(p.DaemonDir, 0o700); err != nil {
		return fmt.Errorf("create daemon directory: %w", err)
	}
	if err := os.Chmod(p.DaemonDir, 0o700); err != nil {
		return fmt.Errorf("set daemon directory mode: %w", err)
	}
	return nil
}

// The environment an agent session is described by: `claudemesh launch`
// sets these in its child's environment; `claudemesh mcp` and the hook
// receiver read them.
const (
	EnvSessionID   = "CLAUDEMESH_SESSION_ID"
	EnvMesh        = "CLAUDEMESH_MESH"
	EnvDisplayName = "CLAUDEMESH_DISPLAY_NAME"
)
