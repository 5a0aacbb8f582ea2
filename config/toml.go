package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Clone policies of [clone] policy: what the daemon does when the host it
// runs on is not the one recorded in host_fingerprint.json.
const (
	ClonePolicyRefuse = "refuse"
	ClonePolicyWarn   = "warn"
	ClonePolicyAllow  = "allow"
)

// File is config.toml, the daemon's user-editable settings (default path:
// config.toml in the daemon directory; `daemon up --config` names another).
// A missing file means every default. Unknown keys are refused, so that a
// typo never silently leaves a default in place.
type File struct {
	Daemon   DaemonSection   `toml:"daemon"`
	IPC      IPCSection      `toml:"ipc"`
	Log      LogSection      `toml:"log"`
	Clone    CloneSection    `toml:"clone"`
	Outbox   OutboxSection   `toml:"outbox"`
	Inbox    InboxSection    `toml:"inbox"`
	Disk     DiskSection     `toml:"disk"`
	Features FeaturesSection `toml:"features"`
	// tcpSet says the file sets [ipc] tcp_enabled; when it does not, the
	// daemon turns TCP off in containers and CI (TCPSet).
	tcpSet bool
}

// OutboxSection is [outbox]. Hot on SIGHUP.
type OutboxSection struct {
	// MaxSizeMB caps outbox.db and its WAL: at 80 % the daemon raises
	// outbox_pressure_high, at 95 % it refuses new sends (507).
	MaxSizeMB int64 `toml:"max_size_mb"`
	// FsyncMode is when an answered send reaches the disk: strict (before
	// the 202), batched_50ms (within 50 ms after it) or off (at SQLite's
	// next checkpoint). See FsyncMode.
	FsyncMode string `toml:"fsync_mode"`
	// RetentionDays is how long a done or aborted row keeps its payload;
	// the row, its id and fingerprint stay for ever.
	RetentionDays int `toml:"retention_days"`
}

// InboxSection is [inbox]. Hot on SIGHUP.
type InboxSection struct {
	// RetentionDays is how long received messages are kept.
	RetentionDays int `toml:"retention_days"`
}

// DiskSection is [disk]. Hot on SIGHUP.
type DiskSection struct {
	// ReservedMB is the free space the daemon directory's filesystem keeps:
	// pressure is reserve / free, with the thresholds of [outbox].
	ReservedMB int64 `toml:"reserved_mb"`
}

// FeaturesSection is [features].
type FeaturesSection struct {
	// LegacyBroker accepts a broker that does not negotiate the delivery
	// contract (the upstream broker), as --legacy-broker does: for the
	// daemon and for `claudemesh send`'s cold path.
	LegacyBroker bool `toml:"legacy_broker"`
}

// DaemonSection is [daemon].
type DaemonSection struct {
	LogLevel string `toml:"log_level"` // debug | info | warn | error; hot on SIGHUP
}

// IPCSection is [ipc]. Changes need a restart.
type IPCSection struct {
	TCPEnabled        bool     `toml:"tcp_enabled"`
	HTTPBind          string   `toml:"http_bind"` // a loopback address
	HTTPPort          int      `toml:"http_port"` // 0 lets the kernel pick; written to http.port
	PublicHealthCheck bool     `toml:"public_health_check"`
	OriginAllowlist   []string `toml:"origin_allowlist"` // Origins allowed to call the API; default none
}

// LogSection is [log]: rotation of daemon.log when the daemon runs
// detached. Hot on SIGHUP.
type LogSection struct {
	MaxSizeMB  int `toml:"max_size_mb"`  // rotate when daemon.log reaches this size
	MaxAgeDays int `toml:"max_age_days"` // delete rotated logs older than this
}

// CloneSection is [clone].
type CloneSection struct {
	Policy string `toml:"policy"` // refuse | warn | allow
}

// DefaultFile is the configuration with no config.toml.
func DefaultFile() File {
	return File{
		Daemon: DaemonSection{LogLevel: "info"},
		IPC:    IPCSection{TCPEnabled: true, HTTPBind: "127.0.0.1", HTTPPort: 47823, OriginAllowlist: []string{}},
		Log:    LogSection{MaxSizeMB: 100, MaxAgeDays: 14},
		Clone:  CloneSection{Policy: ClonePolicyRefuse},
		Outbox: OutboxSection{MaxSizeMB: 5120, FsyncMode: FsyncStrict.String(), RetentionDays: 30},
		Inbox:  InboxSection{RetentionDays: 30},
		Disk:   DiskSection{ReservedMB: 256},
	}
}

// ConfigTOML is the default config.toml path.
func (p Paths) ConfigTOML() string { return filepath.Join(p.DaemonDir, "config.toml") }

// LoadFile reads and validates config.toml at path. Every error names the
// file and the key.
func LoadFile(path string) (File, error) {
	f := DefaultFile()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, describeTOMLError(path, err)
	}
	var set struct {
		IPC map[string]any `toml:"ipc"`
	}
	if err := toml.Unmarshal(data, &set); err == nil {
		_, f.tcpSet = set.IPC["tcp_enabled"]
	}
	return f, f.validate(path)
}

// TCPSet reports whether config.toml sets [ipc] tcp_enabled. When it does
// not, tcp_enabled = true is only the default outside containers and CI.
func (f *File) TCPSet() bool { return f.tcpSet }

func describeTOMLError(path string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		keys := make([]string, 0, len(strict.Errors))
		for _, e := range strict.Errors {
			keys = append(keys, strings.Join(e.Key(), "."))
		}
		return fmt.Errorf("%s: unknown key %s", path, strings.Join(keys, ", "))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		if key := strings.Join(de.Key(), "."); key != "" {
			return fmt.Errorf("%s:%d:%d: %s: %s", path, row, col, key, de.Error())
		}
		return fmt.Errorf("%s:%d:%d: %s", path, row, col, de.Error())
	}
	return fmt.Errorf("%s: %w", path, err)
}

func (f *File) validate(path string) error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", path, key, fmt.Sprintf(format, args...))
	}
	switch f.Daemon.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return bad("daemon.log_level", "must be debug, info, warn or error, not %q", f.Daemon.LogLevel)
	}
	if ip := net.ParseIP(f.IPC.HTTPBind); f.IPC.HTTPBind != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return bad("ipc.http_bind", "must be a loopback address (127.0.0.1, ::1 or localhost), not %q", f.IPC.HTTPBind)
	}
	if f.IPC.HTTPPort < 0 || f.IPC.HTTPPort > 65535 {
		return bad("ipc.http_port", "must be 0-65535, not %d", f.IPC.HTTPPort)
	}
	for _, o := range f.IPC.OriginAllowlist {
		if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" {
			return bad("ipc.origin_allowlist", "%q is not an origin (scheme://host[:port])", o)
		}
	}
	if f.Log.MaxSizeMB < 1 {
		return bad("log.max_size_mb", "must be at least 1, not %d", f.Log.MaxSizeMB)
	}
	if f.Log.MaxAgeDays < 1 {
		return bad("log.max_age_days", "must be at least 1, not %d", f.Log.MaxAgeDays)
	}
	switch f.Clone.Policy {
	case ClonePolicyRefuse, ClonePolicyWarn, ClonePolicyAllow:
	default:
		return bad("clone.policy", "must be refuse, warn or allow, not %q", f.Clone.Policy)
	}
	if f.Outbox.MaxSizeMB < 1 {
		return bad("outbox.max_size_mb", "must be at least 1, not %d", f.Outbox.MaxSizeMB)
	}
	if _, err := ParseFsyncMode(f.Outbox.FsyncMode); err != nil {
		return bad("outbox.fsync_mode", "%v", err)
	}
	if f.Outbox.RetentionDays < 1 {
		return bad("outbox.retention_days", "must be at least 1, not %d", f.Outbox.RetentionDays)
	}
	if f.Inbox.RetentionDays < 1 {
		return bad("inbox.retention_days", "must be at least 1, not %d", f.Inbox.RetentionDays)
	}
	if f.Disk.ReservedMB < 0 {
		return bad("disk.reserved_mb", "must not be negative, not %d", f.Disk.ReservedMB)
	}
	return nil
}

// Fsync is [outbox] fsync_mode, parsed (validate has checked it).
func (f *File) Fsync() FsyncMode {
	m, _ := ParseFsyncMode(f.Outbox.FsyncMode)
	return m
}

// DiskLimits are the pressure thresholds in bytes.
func (f *File) DiskLimits() (outboxMaxBytes, reservedBytes int64) {
	return f.Outbox.MaxSizeMB << 20, f.Disk.ReservedMB << 20
}

// TCPAddr is the TCP listener's address, "" when TCP is off.
func (f *File) TCPAddr() string {
	if !f.IPC.TCPEnabled {
		return ""
	}
	return net.JoinHostPort(f.IPC.HTTPBind, strconv.Itoa(f.IPC.HTTPPort))
}
