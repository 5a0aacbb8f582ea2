// Package join owns the broker's HTTP join endpoint and its client: the one
// step that turns an invite URL into a registered member key.
//
// An invite URL is `<broker base URL>/join/<token>`, where the token is the
// broker store's base64url invite token and the base URL is http(s) with an
// optional path prefix (a broker behind a reverse proxy). The broker's
// WebSocket is the same base with ws(s) and `/ws`:
//
//	http://127.0.0.1:7900/join/AbC…  →  ws://127.0.0.1:7900/ws
//	https://mesh.example/cm/join/AbC… →  wss://mesh.example/cm/ws
//
// The joiner POSTs `{"pubkey","display_name","signature"}` to the invite URL.
// The signature is ed25519, by the key being registered, over
// `claudemesh-join|<token>|<pubkey>` (SignatureMessage): proof that the
// caller holds the secret key, bound to this invite. The broker answers the
// membership (mesh id, member id, slug, name) or an error envelope
// `{"error": code, "detail": …}`.
//
// Decisions the spec leaves open:
//   - Our broker has no mesh display name; "name" is the mesh slug.
//   - A retried join with the same key returns the same membership without
//     using up the invite (the store's rule), so a client that lost the
//     answer may simply retry.
//   - The client never follows redirects: it would re-send the invite to a
//     host the user did not name. A redirect is reported with its target.
//
// This package never logs invite tokens (they are bearer secrets until used
// up) nor the request path that carries them. Redeem never stores the key
// it registers: the caller records it with config.Paths.AddMembership, which writes
// config.json in the upstream format.
package join

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Limits.
const (
	// MaxRequestBytes bounds a join request body.
	MaxRequestBytes = 16 << 10
	// MaxResponseBytes bounds the answer the client reads.
	MaxResponseBytes = 64 << 10
	// MaxDisplayNameBytes is the store's limit on a member's display name.
	MaxDisplayNameBytes = 128

	signaturePrefix = "claudemesh-join"
	// PathPrefix starts the path of every invite URL (after any base path).
	PathPrefix = "/join/"
)

// Error codes of the envelope.
const (
	CodeInvalidJSON        = "invalid_json"
	CodeInvalidPubkey      = "invalid_pubkey"
	CodeInvalidDisplayName = "invalid_display_name"
	CodeInvalidRequest     = "invalid_request"
	CodeBadSignature       = "bad_signature"
	CodeInviteUnknown      = "invite_unknown"
	CodeInviteExpired      = "invite_expired"
	CodeInviteUsedUp       = "invite_used_up"
	CodeMemberRevoked      = "member_revoked"
	CodeBodyTooLarge       = "body_too_large"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeNotFound           = "not_found"
	CodeInternal           = "internal"
)

// Request is the body of POST /join/{token}.
type Request struct {
	Pubkey      string `json:"pubkey"`       // 64 hex, ed25519
	DisplayName string `json:"display_name"` // 1-128 bytes after trimming
	Signature   string `json:"signature"`    // 128 hex over SignatureMessage(token, Pubkey)
}

// Response is the 200 answer: the membership the key now holds.
type Response struct {
	MeshID      string `json:"mesh_id"`
	MemberID    string `json:"member_id"`
	Slug        string `json:"slug"`
	Name        string `json:"name"`
	DisplayName string `json:"display_name"`
}

// ErrorBody is every non-200 answer.
type ErrorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}

// SignatureMessage is what the joining key signs: the invite token and the
// pubkey exactly as sent.
func SignatureMessage(token, pubkey string) []byte {
	return []byte(signaturePrefix + "|" + token + "|" + pubkey)
}

// ErrBadInviteURL reports an invite URL that is not http(s)://…/join/<token>.
var ErrBadInviteURL = errors.New("not a claudemesh invite URL")

// Invite is a parsed invite URL.
type Invite struct {
	JoinURL   string // where to POST: the invite URL, normalized
	Token     string
	BrokerURL string // the broker's WebSocket URL
}

// ParseInviteURL parses `http(s)://host[/base]/join/<token>`. Surrounding
// white space and one trailing slash are tolerated; a query, fragment or
// user info is not.
func ParseInviteURL(raw string) (*Invite, error) {
	s := strings.TrimSuffix(strings.TrimSpace(raw), "/")
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInviteURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: %q: the scheme must be http or https", ErrBadInviteURL, redactURL(s))
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("%w: %q: want %s://host/join/<token>", ErrBadInviteURL, redactURL(s), u.Scheme)
	}
	i := strings.LastIndex(u.Path, PathPrefix)
	if i < 0 {
		return nil, fmt.Errorf("%w: %q: the path must end in /join/<token>", ErrBadInviteURL, redactURL(s))
	}
	base, token := u.Path[:i], u.Path[i+len(PathPrefix):]
	if !validToken(token) {
		return nil, fmt.Errorf("%w: %q: the token after /join/ must be base64url", ErrBadInviteURL, redactURL(s))
	}
	ws := *u
	ws.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	ws.Path, ws.RawPath = base+"/ws", ""
	return &Invite{JoinURL: u.String(), Token: token, BrokerURL: ws.String()}, nil
}

// InviteURL builds the invite URL for token on the broker at base, an
// http(s) base URL; the broker's ws(s)://…/ws URL is accepted too.
func InviteURL(base, token string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return "", fmt.Errorf("broker URL: %w", err)
	}
	switch u.Scheme {
	case "http", "https":
	case "ws", "wss":
		u.Scheme = map[string]string{"ws": "http", "wss": "https"}[u.Scheme]
		u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/ws")
	default:
		return "", fmt.Errorf("broker URL %q: the scheme must be http or https", base)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("broker URL %q: want http(s)://host[:port][/path]", base)
	}
	if !validToken(token) {
		return "", errors.New("invite token is not base64url")
	}
	u.Path, u.RawPath = strings.TrimSuffix(u.Path, "/")+PathPrefix+token, ""
	return u.String(), nil
}

// validToken accepts 1-256 base64url characters: anything else cannot be
// a token the store minted.
func validToken(t string) bool {
	if t == "" || len(t) > 256 {
		return false
	}
	for _, c := range t {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// redactURL hides the token part of an invite URL in error messages.
func redactURL(s string) string {
	if i := strings.LastIndex(s, PathPrefix); i >= 0 && len(s) > i+len(PathPrefix) {
		return s[:i+len(PathPrefix)] + "…"
	}
	return s
}
