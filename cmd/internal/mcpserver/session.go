package mcpserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// The IPC token of an agent session: `claudemesh launch` puts the file's
// path in its child's environment, beside config.EnvSessionID, EnvMesh and
// EnvDisplayName; `claudemesh mcp` reads them (CLAUDEMESH_IPC_TOKEN, the
// token itself, is for tests).
const (
	EnvTokenFile = "CLAUDEMESH_IPC_TOKEN_FILE"
	EnvToken     = "CLAUDEMESH_IPC_TOKEN"
)

// sessionRequestTimeout bounds one session request to the daemon.
const sessionRequestTimeout = 10 * time.Second

// mintSessionToken returns a fresh session token: 32 random bytes, hex.
func mintSessionToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mint a session token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// defaultDisplayName is `<basename of cwd>-<4 hex>`, short enough for the
// daemon's 64-byte limit.
func defaultDisplayName(cwd string) string {
	base := messages.SessionNameBase(cwd)
	var b [2]byte
	_, _ = rand.Read(b[:])
	return base + "-" + hex.EncodeToString(b[:])
}

// SessionToken is the session token the environment names: the content
// of CLAUDEMESH_IPC_TOKEN_FILE, else CLAUDEMESH_IPC_TOKEN; "" for none.
func SessionToken() (string, error) {
	if path := os.Getenv(EnvTokenFile); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("%s names a token file that cannot be read: %w", EnvTokenFile, err)
		}
		tok := strings.ToLower(strings.TrimSpace(string(b)))
		if !messages.ValidSessionToken(tok) {
			return "", fmt.Errorf("%s (%s) does not hold a session token (64 hex characters)", EnvTokenFile, path)
		}
		return tok, nil
	}
	tok := strings.ToLower(strings.TrimSpace(os.Getenv(EnvToken)))
	if tok != "" && !messages.ValidSessionToken(tok) {
		return "", fmt.Errorf("%s is not a session token (64 hex characters)", EnvToken)
	}
	return tok, nil
}

// SessionSource names the variable SessionToken reads the token from:
// EnvTokenFile when it is set, else EnvToken.
func SessionSource() string {
	if os.Getenv(EnvTokenFile) != "" {
		return EnvTokenFile
	}
	return EnvToken
}

// InsideSession reports whether the environment describes a session this
// process runs in (an enclosing `claudemesh launch`).
func InsideSession() bool { return os.Getenv(EnvTokenFile) != "" || os.Getenv(EnvToken) != "" }

// ChooseMesh is the mesh a new session joins: the one asked for (flag, then
// CLAUDEMESH_MESH), else the daemon's default (messages.DefaultMesh: its
// only membership, other agents' identities of `daemon add-agent` aside,
// as for a plain send), else its only membership.
func ChooseMesh(asked string, v *messages.Version) (string, error) {
	if asked == "" {
		asked = os.Getenv(config.EnvMesh)
	}
	slugs := make([]string, len(v.Meshes))
	for i, m := range v.Meshes {
		slugs[i] = m.Mesh
	}
	switch {
	case asked != "":
		for _, s := range slugs {
			if s == asked {
				return asked, nil
			}
		}
		return "", fmt.Errorf("the daemon (pid %d) serves no mesh %q (it serves: %s)", v.PID, asked, cmp.Or(strings.Join(slugs, ", "), "none"))
	case messages.DefaultMesh(v.Meshes) != "":
		return messages.DefaultMesh(v.Meshes), nil
	case len(slugs) == 1:
		return slugs[0], nil
	case len(slugs) == 0:
		return "", fmt.Errorf("the daemon (pid %d) serves no mesh: join one with `claudemesh join <invite-url>`", v.PID)
	}
	return "", fmt.Errorf("the daemon serves several meshes (%s): name one with --mesh or %s", strings.Join(slugs, ", "), config.EnvMesh)
}

// NewRegistration is the registration of a session minted here: the token
// given (or a fresh one), the session id from CLAUDEMESH_SESSION_ID (or a
// fresh ULID), the display name asked for (or CLAUDEMESH_DISPLAY_NAME, or
// the default), this process's pid and working directory. With inherit
// false the two variables are not read: they describe an enclosing
// session, whose id a new session must not take over.
func NewRegistration(token, mesh, name string, inherit bool) (*messages.RegisterSession, error) {
	if token == "" {
		var err error
		if token, err = mintSessionToken(); err != nil {
			return nil, err
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	var id string
	if inherit {
		id = os.Getenv(config.EnvSessionID)
	}
	if id == "" {
		id = ulid.Make().String()
	}
	if name == "" && inherit {
		name = os.Getenv(config.EnvDisplayName)
	}
	if name == "" {
		name = defaultDisplayName(cwd)
	}
	return &messages.RegisterSession{Token: token, SessionID: id, Mesh: mesh, DisplayName: name, PID: os.Getpid(), Cwd: cwd}, nil
}

// Session is one agent session at the daemon: the token it calls
// with, and the registration that (re)creates it. A session this process
// registered is owned, and deregistered when the process ends.
type Session struct {
	daemon *ipc.Client // calls as no session
	client *ipc.Client // calls as the session
	owned  bool

	mu       sync.Mutex
	reg      messages.RegisterSession
	pubkey   string
	verified bool // the daemon answered for this session since it was last in doubt
}

// register registers reg with the daemon and returns the owned session.
func Register(ctx context.Context, daemon *ipc.Client, reg *messages.RegisterSession) (*Session, error) {
	s := &Session{daemon: daemon, client: daemon.AsSession(reg.Token), owned: true, reg: *reg}
	if err := s.registerLocked(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// attach returns the session token names when the daemon knows it (nil,
// nil when it does not): a session someone else (`claudemesh launch`)
// registered and will deregister.
func attach(ctx context.Context, daemon *ipc.Client, token string) (*Session, error) {
	client := daemon.AsSession(token)
	rctx, cancel := context.WithTimeout(ctx, sessionRequestTimeout)
	defer cancel()
	info, err := client.SessionMe(rctx)
	if isUnknownSession(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	reg := messages.RegisterSession{Token: token, SessionID: info.SessionID, Mesh: info.Mesh, DisplayName: info.DisplayName,
		PID: info.PID, Cwd: info.Cwd, Role: info.Role, Groups: info.Groups}
	return &Session{daemon: daemon, client: client, reg: reg, pubkey: info.Presence.SessionPubkey, verified: true}, nil
}

// isUnknownSession reports an answer that says the daemon does not know
// the session token (it ended, or the daemon forgot it).
func isUnknownSession(err error) bool {
	var me *messages.Error
	return errors.As(err, &me) && me.Status == http.StatusUnauthorized && me.Code != "no_session_token"
}

// registerLocked registers s.reg; s.mu is held or s not yet shared.
func (s *Session) registerLocked(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, sessionRequestTimeout)
	defer cancel()
	reg := s.reg // Validate normalises the copy the daemon gets
	res, err := s.daemon.RegisterSession(rctx, &reg)
	if err != nil {
		return fmt.Errorf("register the session with the daemon: %w", err)
	}
	s.pubkey, s.verified = res.SessionPubkey, true
	return nil
}

// ensure makes sure the daemon knows the session, registering it again
// when the daemon forgot it (a restart without its sessions). It asks only
// after something put the session in doubt (see doubt).
func (s *Session) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.verified {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, sessionRequestTimeout)
	info, err := s.client.SessionMe(rctx)
	cancel()
	switch {
	case err == nil:
		s.pubkey, s.verified = info.Presence.SessionPubkey, true
		return nil
	case isUnknownSession(err):
		return s.registerLocked(ctx)
	}
	return err
}

// doubt marks the session as to be checked before its next use: the
// daemon was unreachable or its event stream ended.
func (s *Session) doubt() {
	s.mu.Lock()
	s.verified = false
	s.mu.Unlock()
}

// as is the client that calls as the session.
func (s *Session) as() *ipc.Client { return s.client }

// info is the session's registration and its key.
func (s *Session) Info() (reg messages.RegisterSession, pubkey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reg, s.pubkey
}

// end deregisters an owned session; a session someone else registered is
// left to them.
func (s *Session) End() error {
	if !s.owned {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := s.daemon.DeregisterSession(ctx, s.reg.Token)
	var me *messages.Error
	if errors.As(err, &me) && me.Status == http.StatusNotFound {
		return nil // already gone (the daemon forgot it)
	}
	return err
}

// envClaudeSessionID is the session id Claude Code puts in the environment
// of its hooks and (since 2.1.154) of its stdio MCP servers: the hook
// JSON's session_id. `claudemesh mcp` registers under it, so that the
// hooks' events and the MCP server's session are one peer.
const envClaudeSessionID = "CLAUDE_CODE_SESSION_ID"
