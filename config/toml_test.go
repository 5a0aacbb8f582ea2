package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// writeTOML writes body to config.toml in a fresh directory and returns its path.
func writeTOML(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadFileMissingIsDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	f, err := LoadFile(path)
	if err != nil {
		t.Fatalf("LoadFile of a missing file: %v", err)
	}
	want := File{
		Daemon: DaemonSection{LogLevel: "info"},
		IPC:    IPCSection{TCPEnabled: true, HTTPBind: "127.0.0.1", HTTPPort: 47823, OriginAllowlist: []string{}},
		Log:    LogSection{MaxSizeMB: 100, MaxAgeDays: 14},
		Clone:  CloneSection{Policy: ClonePolicyRefuse},
		Outbox: OutboxSection{MaxSizeMB: 5120, FsyncMode: "strict", RetentionDays: 30},
		Inbox:  InboxSection{RetentionDays: 30},
		Disk:   DiskSection{ReservedMB: 256},
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", f, want)
	}
	if !reflect.DeepEqual(DefaultFile(), want) {
		t.Errorf("DefaultFile() = %+v", DefaultFile())
	}
	if got := f.TCPAddr(); got != "127.0.0.1:47823" {
		t.Errorf("default TCPAddr %q", got)
	}
	// An empty file is every default too.
	f, err = LoadFile(writeTOML(t, "# nothing set\n"))
	if err != nil || !reflect.DeepEqual(f, want) {
		t.Errorf("empty file: %+v, %v", f, err)
	}
	// A file that sets one key keeps the defaults of the others.
	f, err = LoadFile(writeTOML(t, "[log]\nmax_age_days = 3\n"))
	want.Log.MaxAgeDays = 3
	if err != nil || !reflect.DeepEqual(f, want) {
		t.Errorf("one key set:\n got %+v, %v\nwant %+v", f, err, want)
	}
}

func TestLoadFileEveryKey(t *testing.T) {
	path := writeTOML(t, `
[daemon]
log_level = "debug"

[ipc]
tcp_enabled = false
http_bind = "::1"
http_port = 0
public_health_check = true
origin_allowlist = ["http://localhost:3000", "https://app.example:8443"]

[log]
max_size_mb = 7
max_age_days = 2

[clone]
policy = "warn"

[outbox]
max_size_mb = 64
fsync_mode = "batched_50ms"
retention_days = 7

[inbox]
retention_days = 90

[disk]
reserved_mb = 0

[features]
legacy_broker = true
`)
	f, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := File{
		Daemon: DaemonSection{LogLevel: "debug"},
		IPC: IPCSection{TCPEnabled: false, HTTPBind: "::1", HTTPPort: 0, PublicHealthCheck: true,
			OriginAllowlist: []string{"http://localhost:3000", "https://app.example:8443"}},
		Log:      LogSection{MaxSizeMB: 7, MaxAgeDays: 2},
		Clone:    CloneSection{Policy: ClonePolicyWarn},
		Outbox:   OutboxSection{MaxSizeMB: 64, FsyncMode: "batched_50ms", RetentionDays: 7},
		Inbox:    InboxSection{RetentionDays: 90},
		Features: FeaturesSection{LegacyBroker: true},
		Disk:     DiskSection{ReservedMB: 0},
		tcpSet:   true,
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("loaded:\n got %+v\nwant %+v", f, want)
	}
	if f, err := LoadFile(writeTOML(t, "[ipc]\nhttp_port = 0\n")); err != nil || f.TCPSet() {
		t.Errorf("a file without tcp_enabled: TCPSet %v, %v", f.TCPSet(), err)
	}
	for ok, mode := range map[string]FsyncMode{"strict": FsyncStrict,
		"batched_50ms": FsyncBatched, "off": FsyncOff} {
		f, err := LoadFile(writeTOML(t, "[outbox]\nfsync_mode = \""+ok+"\"\n"))
		if err != nil || f.Fsync() != mode {
			t.Errorf("outbox.fsync_mode %q: %v, %v", ok, f.Fsync(), err)
		}
	}
	for _, ok := range []string{"debug", "info", "warn", "error"} {
		if _, err := LoadFile(writeTOML(t, "[daemon]\nlog_level = \""+ok+"\"\n")); err != nil {
			t.Errorf("log_level %q: %v", ok, err)
		}
	}
	for _, ok := range []string{"refuse", "warn", "allow"} {
		if _, err := LoadFile(writeTOML(t, "[clone]\npolicy = \""+ok+"\"\n")); err != nil {
			t.Errorf("clone.policy %q: %v", ok, err)
		}
	}
	for _, ok := range []string{"127.0.0.1", "127.1.2.3", "::1", "localhost"} {
		if _, err := LoadFile(writeTOML(t, "[ipc]\nhttp_bind = \""+ok+"\"\n")); err != nil {
			t.Errorf("ipc.http_bind %q: %v", ok, err)
		}
	}
	for _, ok := range []string{"0", "1", "65535"} {
		if _, err := LoadFile(writeTOML(t, "[ipc]\nhttp_port = "+ok+"\n")); err != nil {
			t.Errorf("ipc.http_port %s: %v", ok, err)
		}
	}
}

func TestLoadFileInvalidValuesNameFileAndKey(t *testing.T) {
	cases := []struct {
		key, body string
	}{
		{"daemon.log_level", "[daemon]\nlog_level = \"verbose\"\n"},
		{"daemon.log_level", "[daemon]\nlog_level = \"\"\n"},
		{"daemon.log_level", "[daemon]\nlog_level = \"DEBUG\"\n"},
		{"outbox.max_size_mb", "[outbox]\nmax_size_mb = 0\n"},
		{"outbox.fsync_mode", "[outbox]\nfsync_mode = \"batched\"\n"},
		{"outbox.retention_days", "[outbox]\nretention_days = 0\n"},
		{"inbox.retention_days", "[inbox]\nretention_days = -3\n"},
		{"outbox.fsync_mode", "[outbox]\nfsync_mode = \"\"\n"},
		{"outbox.fsync_mode", "[outbox]\nfsync_mode = \"STRICT\"\n"},
		{"disk.reserved_mb", "[disk]\nreserved_mb = -1\n"},
		{"ipc.http_bind", "[ipc]\nhttp_bind = \"0.0.0.0\"\n"},
		{"ipc.http_bind", "[ipc]\nhttp_bind = \"192.168.1.10\"\n"},
		{"ipc.http_bind", "[ipc]\nhttp_bind = \"example.com\"\n"},
		{"ipc.http_bind", "[ipc]\nhttp_bind = \"\"\n"},
		{"ipc.http_port", "[ipc]\nhttp_port = 70000\n"},
		{"ipc.http_port", "[ipc]\nhttp_port = 65536\n"},
		{"ipc.http_port", "[ipc]\nhttp_port = -1\n"},
		{"ipc.origin_allowlist", "[ipc]\norigin_allowlist = [\"not a url\"]\n"},
		{"ipc.origin_allowlist", "[ipc]\norigin_allowlist = [\"http://localhost:3000\", \"localhost:3000\"]\n"},
		{"ipc.origin_allowlist", "[ipc]\norigin_allowlist = [\"http://localhost:3000/app\"]\n"},
		{"log.max_size_mb", "[log]\nmax_size_mb = 0\n"},
		{"log.max_size_mb", "[log]\nmax_size_mb = -5\n"},
		{"log.max_age_days", "[log]\nmax_age_days = 0\n"},
		{"clone.policy", "[clone]\npolicy = \"maybe\"\n"},
		{"clone.policy", "[clone]\npolicy = \"\"\n"},
	}
	for _, c := range cases {
		path := writeTOML(t, c.body)
		_, err := LoadFile(path)
		if err == nil {
			t.Errorf("%q: no error", c.body)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, c.key) {
			t.Errorf("%q: error %q does not name both %s and %s", c.body, msg, path, c.key)
		}
	}
}

func TestLoadFileWrongTypeNamesKey(t *testing.T) {
	path := writeTOML(t, "[log]\nmax_size_mb = \"ten\"\n")
	_, err := LoadFile(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "log.max_size_mb") {
		t.Errorf("string for an int: %v, want the file and log.max_size_mb", err)
	}
}

func TestLoadFileUnknownKey(t *testing.T) {
	path := writeTOML(t, "[ipc]\nhtp_port = 1\n")
	_, err := LoadFile(path)
	if err == nil {
		t.Fatal("unknown key accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "ipc.htp_port") {
		t.Errorf("error %q does not name %s and ipc.htp_port", msg, path)
	}
	// An unknown section is refused the same way.
	path = writeTOML(t, "[daemon]\nlog_level = \"info\"\n[deamon]\nlog_level = \"debug\"\n")
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "deamon") || !strings.Contains(err.Error(), path) {
		t.Errorf("unknown section: %v", err)
	}
}

func TestLoadFileSyntaxErrorHasPosition(t *testing.T) {
	path := writeTOML(t, "[daemon]\nlog_level = \"info\"\n[ipc\nhttp_port = 1\n")
	_, err := LoadFile(path)
	if err == nil {
		t.Fatal("syntax error accepted")
	}
	re := regexp.MustCompile(regexp.QuoteMeta(path) + `:(\d+):(\d+)`)
	m := re.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q lacks %s:LINE:COL", err, path)
	}
	if m[1] != "3" {
		t.Errorf("error %q: line %s, want 3 (the unclosed [ipc)", err, m[1])
	}
}

func TestTCPAddr(t *testing.T) {
	cases := []struct {
		ipc  IPCSection
		want string
	}{
		{IPCSection{TCPEnabled: false, HTTPBind: "127.0.0.1", HTTPPort: 47823}, ""},
		{IPCSection{TCPEnabled: true, HTTPBind: "127.0.0.1", HTTPPort: 47823}, "127.0.0.1:47823"},
		{IPCSection{TCPEnabled: true, HTTPBind: "localhost", HTTPPort: 0}, "localhost:0"},
		{IPCSection{TCPEnabled: true, HTTPBind: "::1", HTTPPort: 8080}, "[::1]:8080"},
	}
	for _, c := range cases {
		f := DefaultFile()
		f.IPC = c.ipc
		if got := f.TCPAddr(); got != c.want {
			t.Errorf("%+v: TCPAddr %q, want %q", c.ipc, got, c.want)
		}
	}
	// Through a file: disabled, and an IPv6 bind.
	f, err := LoadFile(writeTOML(t, "[ipc]\ntcp_enabled = false\n"))
	if err != nil || f.TCPAddr() != "" {
		t.Errorf("tcp_enabled = false: %q, %v", f.TCPAddr(), err)
	}
	f, err = LoadFile(writeTOML(t, "[ipc]\nhttp_bind = \"::1\"\nhttp_port = 9\n"))
	if err != nil || f.TCPAddr() != "[::1]:9" {
		t.Errorf("::1 port 9: %q, %v", f.TCPAddr(), err)
	}
}
