package config

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SessionRecord is one registered agent session as sessions.json keeps it
// (the upstream file's fields). It holds no key: a session's key lives in
// its own file (SessionKey).
type SessionRecord struct {
	Token        string   `json:"token"`
	SessionID    string   `json:"sessionId"`
	Mesh         string   `json:"mesh"`
	DisplayName  string   `json:"displayName"`
	PID          int      `json:"pid"`
	Cwd          string   `json:"cwd,omitempty"`
	Role         string   `json:"role,omitempty"`
	Groups       []string `json:"groups,omitempty"`
	StartTime    uint64   `json:"startTime,omitempty"` // ProcessStartTime of PID at registration (0: unknown)
	RegisteredAt int64    `json:"registeredAt"`        // Unix ms
	// Aliases are the session ids an agent went on under in the same
	// process (Claude Code's /clear starts a new one), whose hooks act on
	// this session.
	Aliases []string `json:"aliases,omitempty"`
}

type sessionsFile struct {
	Version  int             `json:"version"`
	Sessions []SessionRecord `json:"sessions"`
}

// SessionsFile is sessions.json inside DaemonDir: the registry a daemon
// restart brings back.
func (p Paths) SessionsFile() string { return filepath.Join(p.DaemonDir, "sessions.json") }

// SessionKeyFile is where the key of session id on mesh lives:
// ConfigDir/sessions/<mesh>/<id>.json (0600 in 0700 directories).
func (p Paths) SessionKeyFile(mesh, id string) string {
	return filepath.Join(p.ConfigDir, "sessions", mesh, id+".json")
}

// LoadSessions reads sessions.json; a missing file is an empty registry. A
// file that does not parse is moved aside (sessions.json.corrupt-<unix>)
// and reported in err together with an empty registry, so that a damaged
// file never stops the daemon and is never silently overwritten.
func (p Paths) LoadSessions() ([]SessionRecord, error) {
	recs, err := p.ReadSessions()
	var bad *sessionsParseError
	if !errors.As(err, &bad) {
		return recs, err
	}
	aside := p.SessionsFile() + ".corrupt-" + strconv.FormatInt(time.Now().Unix(), 10)
	if rerr := os.Rename(p.SessionsFile(), aside); rerr != nil {
		return nil, fmt.Errorf("%s: %w (and moving it aside failed: %v)", p.SessionsFile(), bad.err, rerr)
	}
	return nil, fmt.Errorf("%s does not parse (%w): moved to %s, starting with no sessions", p.SessionsFile(), bad.err, aside)
}

// ReadSessions reads sessions.json as it stands and changes nothing (the
// agent hook reads it beside the daemon); a missing file is an empty
// registry.
func (p Paths) ReadSessions() ([]SessionRecord, error) {
	b, err := os.ReadFile(p.SessionsFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f sessionsFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 1 {
		if err == nil {
			err = fmt.Errorf("version %d, want 1", f.Version)
		}
		return nil, &sessionsParseError{err}
	}
	return f.Sessions, nil
}

// sessionsParseError is a sessions.json that does not parse.
type sessionsParseError struct{ err error }

func (e *sessionsParseError) Error() string { return e.err.Error() }

// ContinuedSession is the session a Claude Code /clear in agent process
// pid goes on as: of the sessions registered by that process or by a
// child of it (its MCP server), the one registered last. Claude Code keeps
// its process and its MCP servers across a /clear and names a new session
// id, whose hooks then act on that session (an alias of it), so that one
// agent stays one peer.
func ContinuedSession(recs []SessionRecord, pid int) (SessionRecord, bool) {
	var last SessionRecord
	found := false
	for _, r := range recs {
		if pid <= 0 || r.PID != pid && !isChild(r.PID, pid) {
			continue
		}
		if !found || r.RegisteredAt > last.RegisteredAt {
			last, found = r, true
		}
	}
	return last, found
}

func isChild(pid, parent int) bool {
	p, err := ParentPID(pid)
	return err == nil && p == parent
}

// SaveSessions replaces sessions.json atomically (0600), and brings the
// session token files in step with it (SessionTokenFile).
func (p Paths) SaveSessions(records []SessionRecord) error {
	if records == nil {
		records = []SessionRecord{}
	}
	b, err := json.MarshalIndent(sessionsFile{Version: 1, Sessions: records}, "", "  ")
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(p.SessionsFile(), append(b, '\n'), 0o600); err != nil {
		return err
	}
	return p.saveSessionTokens(records)
}

// SessionTokenFile is where the token of the session id is kept for the
// agent's own commands, which find it through CLAUDEMESH_IPC_TOKEN_FILE
// (the agent hook exports it into Claude Code's shell at SessionStart):
// DaemonDir/session-tokens/<id>, 0600 in a 0700 directory, as readable as
// local-token.
func (p Paths) SessionTokenFile(id string) string {
	return filepath.Join(p.DaemonDir, "session-tokens", id)
}

// saveSessionTokens writes each record's token file and removes those of
// sessions no longer registered.
func (p Paths) saveSessionTokens(records []SessionRecord) error {
	dir := filepath.Dir(p.SessionTokenFile("x"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, r := range records {
		keep[r.SessionID] = true
		path, data := p.SessionTokenFile(r.SessionID), []byte(r.Token+"\n")
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			continue // written at the session's registration
		}
		if err := WriteFileAtomic(path, data, 0o600); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !keep[e.Name()] && !strings.HasPrefix(e.Name(), ".") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

type sessionKeyFile struct {
	SessionPubkey    string `json:"sessionPubkey"`
	SessionSecretKey string `json:"sessionSecretKey"` // 128 hex: seed ‖ public key
	CreatedAt        string `json:"createdAt"`
}

// ErrSessionKeyMismatch means a caller-minted key differs from the one
// already kept for that (mesh, session id).
var ErrSessionKeyMismatch = errors.New("session key differs from the one kept for this session id")

// SessionKey returns the secret key (128 hex) of session id on mesh: the
// one kept in its file, else given (a caller-minted key, "" for none), else
// a fresh ed25519 key; a key not kept yet is written first. So a session id
// speaks with the same key across relaunches and daemon restarts.
func (p Paths) SessionKey(mesh, id, given string) (string, error) {
	file := p.SessionKeyFile(mesh, id)
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		var k sessionKeyFile
		if err := json.Unmarshal(b, &k); err != nil || len(k.SessionSecretKey) != 128 {
			return "", fmt.Errorf("%s: not a session key file (remove it to mint a new key): %v", file, err)
		}
		if given != "" && !strings.EqualFold(given, k.SessionSecretKey) {
			return "", fmt.Errorf("%s: %w", file, ErrSessionKeyMismatch)
		}
		return k.SessionSecretKey, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	secret := strings.ToLower(given)
	if secret == "" {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return "", fmt.Errorf("generate session key: %w", err)
		}
		secret = hex.EncodeToString(priv)
	}
	k := sessionKeyFile{SessionPubkey: secret[64:], SessionSecretKey: secret, CreatedAt: time.Now().UTC().Format(time.RFC3339)}
	out, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", fmt.Errorf("create session key directory: %w", err)
	}
	if err := WriteFileAtomic(file, append(out, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", file, err)
	}
	return secret, nil
}

// ProcessStartTime is when process pid started, in clock ticks since boot
// (field 22 of /proc/<pid>/stat): with the pid it names one process, so a
// pid the kernel has handed to another process is told apart. 0 with a nil
// error where /proc is not available (the caller falls back to the pid);
// os.ErrNotExist when there is no such process.
func ProcessStartTime(pid int) (uint64, error) {
	fields, err := procStat(pid)
	if errors.Is(err, ErrNoProc) {
		return 0, processExists(pid)
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(fields[19], 10, 64) // field 22 overall: the 20th after comm
}

// ParentPID is the parent of process pid (where /proc tells it).
func ParentPID(pid int) (int, error) {
	fields, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(fields[1]) // field 4 overall: the 2nd after comm
}

// ErrNoProc says the system has no /proc to read a process from.
var ErrNoProc = errors.New("no /proc")

// procStat is /proc/<pid>/stat's fields after the process's name:
// os.ErrNotExist when no such process runs, ErrNoProc without /proc.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if _, serr := os.Stat("/proc/self/stat"); serr != nil {
			return nil, ErrNoProc
		}
		return nil, os.ErrNotExist
	}
	// comm (field 2) is in parentheses and may hold spaces and ')': the
	// fields after it start past the last ')'.
	i := bytes.LastIndexByte(b, ')')
	fields := strings.Fields(string(b[i+1:]))
	if i < 0 || len(fields) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: unexpected form", pid)
	}
	return fields, nil
}

// processExists reports os.ErrNotExist when no process has pid (signal 0;
// EPERM means one exists that is not ours).
func processExists(pid int) error {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return os.ErrNotExist
	}
	return nil
}
