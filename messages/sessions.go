package messages

import (
	"path/filepath"
	"strings"
	"unicode"
)

// SessionHeader is the scheme of the Authorization header that names the
// calling agent session on the Unix socket:
// `Authorization: ClaudeMesh-Session <64 hex>`.
const SessionHeader = "ClaudeMesh-Session"

// The daemon's refusals of a session token: no session holds it (401), or
// its session's identity is not attached to its mesh at the moment (503).
const (
	CodeSessionUnknown      = "session_unknown"
	CodeSessionNotConnected = "session_not_connected"
)

// The refusals of a registration (409): the name reads as another
// member's (the broker's hello error code too), or the session id is a
// live session's, whose own token alone registers it again.
const (
	CodeDisplayNameTaken = "display_name_taken"
	CodeSessionInUse     = "session_in_use"
)

// RegisterSession is the body of POST /v1/sessions/register, in the
// upstream shape. Token is the session's IPC token (64 hex) the agent will
// present; SessionID is the agent's own session id (Claude Code's session
// UUID), which with Mesh keys the session's identity: registering the same
// (mesh, session id) again gets the same key back. Presence, when given,
// carries a session key minted by the caller (the upstream CLI's launch);
// without it the daemon mints and keeps the key itself.
type RegisterSession struct {
	Token       string            `json:"token"`
	SessionID   string            `json:"session_id"`
	Mesh        string            `json:"mesh"`
	DisplayName string            `json:"display_name"`
	PID         int               `json:"pid"`
	Cwd         string            `json:"cwd,omitempty"`
	Role        string            `json:"role,omitempty"`
	Groups      []string          `json:"groups,omitempty"`
	Presence    *RegisterPresence `json:"presence,omitempty"`
}

// RegisterPresence is a caller-minted session key and its attestation.
type RegisterPresence struct {
	SessionPubkey     string       `json:"session_pubkey"`
	SessionSecretKey  string       `json:"session_secret_key"`
	ParentAttestation *Attestation `json:"parent_attestation,omitempty"`
}

// SessionRegistered is the 200 answer of POST /v1/sessions/register.
// SessionPubkey (ours, beyond upstream) is the key the session speaks as.
type SessionRegistered struct {
	OK               bool   `json:"ok"`
	RegisteredAt     int64  `json:"registered_at"` // Unix ms
	PresenceAccepted bool   `json:"presence_accepted"`
	SessionPubkey    string `json:"session_pubkey"`
}

// SessionDeregistered is the answer of DELETE /v1/sessions/<token>.
type SessionDeregistered struct {
	OK          bool   `json:"ok"`
	TokenPrefix string `json:"token_prefix"`
}

// SessionInfo is a registered session as GET /v1/sessions and
// /v1/sessions/me show it (upstream's camelCase projection). It never
// carries the token (only its first 8 characters) or any secret key.
type SessionInfo struct {
	SessionID    string          `json:"sessionId"`
	Mesh         string          `json:"mesh"`
	DisplayName  string          `json:"displayName"`
	PID          int             `json:"pid"`
	Cwd          string          `json:"cwd,omitempty"`
	Role         string          `json:"role,omitempty"`
	Groups       []string        `json:"groups,omitempty"`
	StartTime    int64           `json:"startTime,omitempty"` // the process's start, clock ticks since boot (the reaper's pid-reuse guard)
	RegisteredAt int64           `json:"registeredAt"`        // Unix ms
	Presence     SessionPresence `json:"presence"`
	TokenPrefix  string          `json:"token_prefix"`
	// Live is what the session's hooks say it is doing (absent before
	// its first hook; GET /v1/sessions only).
	Live *AgentState `json:"live,omitempty"`
}

// SessionPresence is the public half of a session's identity on its mesh.
type SessionPresence struct {
	SessionPubkey string `json:"sessionPubkey"`
	MemberPubkey  string `json:"memberPubkey"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

// SessionMe is the body of GET /v1/sessions/me.
type SessionMe struct {
	Session SessionInfo `json:"session"`
}

// sessionTokenForm is 64 lower-case hex characters.
func sessionTokenForm(s string) bool { return len(s) == 64 && IsHex(s) && strings.ToLower(s) == s }

// ValidSessionID reports whether s has the form of an agent session id, as
// the daemon's session registry takes it and the hook receiver writes it:
// 1-128 of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or
// digit. (Not a regexp: `{0,127}` compiles to a program 128 states long,
// built at every start of every command.)
func ValidSessionID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// Session field limits.
const (
	MaxSessionDisplayName = 64
	MaxSessionCwd         = 4096
	MaxSessionGroups      = 32
	MaxSessionGroupLen    = 64
)

// ValidSessionToken reports whether tok is a session token's form: 64 hex
// (upper case is accepted and lowered by the caller).
func ValidSessionToken(tok string) bool { return sessionTokenForm(strings.ToLower(tok)) }

// Validate normalises r (hex lowered, names trimmed) and checks every field
// against its form and limit; the error names the field.
func (r *RegisterSession) Validate() *Error {
	r.Token = strings.ToLower(strings.TrimSpace(r.Token))
	r.SessionID = strings.TrimSpace(r.SessionID)
	r.Mesh = strings.TrimSpace(r.Mesh)
	r.DisplayName = strings.TrimSpace(r.DisplayName)
	bad := func(detail string) *Error { return &Error{Status: 400, Code: "invalid_session", Detail: detail} }
	switch {
	case !sessionTokenForm(r.Token):
		return bad("token must be 64 hex characters")
	case !ValidSessionID(r.SessionID):
		return bad("session_id must be 1-128 of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
	case r.Mesh == "":
		return bad("mesh is required (the slug of a joined mesh)")
	case r.DisplayName == "":
		return bad("display_name is required")
	case len(r.DisplayName) > MaxSessionDisplayName || !ValidDisplayName(r.DisplayName):
		return bad("display_name must be at most 64 bytes of UTF-8 with something visible and no control, format, bidi or " +
			"zero-width characters (such as U+0085, U+200B or U+202E)")
	case r.PID <= 0:
		return bad("pid must be the agent process's pid (a positive integer)")
	case len(r.Cwd) > MaxSessionCwd:
		return bad("cwd must be at most 4096 bytes")
	case len(r.Groups) > MaxSessionGroups:
		return bad("at most 32 groups")
	}
	for _, g := range r.Groups {
		if g == "" || len(g) > MaxSessionGroupLen || strings.ContainsFunc(g, isControl) {
			return bad("each group must be 1-64 bytes with no control characters")
		}
	}
	if p := r.Presence; p != nil {
		p.SessionPubkey = strings.ToLower(p.SessionPubkey)
		p.SessionSecretKey = strings.ToLower(p.SessionSecretKey)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// InboxSeenRequest is the body of POST /v1/inbox/seen. IDs is nil when
// the body has none (or null), empty for an empty list.
type InboxSeenRequest struct {
	IDs []string `json:"ids"`
}

// InboxMarked is the answer of POST /v1/inbox/seen.
type InboxMarked struct {
	MarkedSeen int `json:"marked_seen"`
}

// SessionNameBase is the start of a session's default display name: the
// base name of its working directory without the characters a display
// name may not hold (ValidDisplayName), at most
// 48 bytes (short enough for the 64-byte limit with a suffix), "agent"
// when there is none.
func SessionNameBase(cwd string) string {
	base := strings.Map(func(r rune) rune {
		if invisible(r) || unicode.In(r, unicode.Zl, unicode.Zp) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(filepath.Base(cwd), ""))
	if NameKey(base) == "" || base == "." || base == "/" {
		base = "agent"
	}
	if len(base) > 48 {
		base = strings.ToValidUTF8(base[:48], "")
	}
	return base
}
