// Package join owns the v1 invite flow of wire-protocol §3.7 on both
// sides: the broker's `POST /join` endpoint (Handler), and the joiner's
// client, which reads an invite link, checks it offline and enrolls a key
// with the broker that issued it (Client).
//
// An invite link carries a token: base64url (no padding) of the invite's
// JSON payload, signed by the mesh owner's ed25519 key
// (messages.InvitePayload). The link forms are those of the upstream CLI:
//
//	ic://join/<token>
//	http(s)://host[/<2-letter locale>]/join/<token>
//	<token>                               (bare, more than 20 characters)
//	https://host[/<locale>]/i/<code>      (short: resolved by GET /api/public/invite-code/<code>)
//
// The host of a link is only where it points a browser: the joiner POSTs
// to the broker the signed payload names. `broker_url` `wss://h/ws` gives
// `https://h/join`, `ws://h:p/ws` `http://h:p/join`; a path before `/ws`
// is kept (`wss://h/cm/ws` → `https://h/cm/join`, where upstream's CLI
// would post to `https://h/join`).
//
// The request is upstream's: `{invite_token, invite_payload, peer_pubkey,
// display_name}`; the answer `200 {ok:true, memberId, alreadyMember?}` or
// `400 {ok:false, error}` (413 for a body over MaxRequestBytes). `error`
// is upstream's code (invite_expired, invite_exhausted, …; Code*), and
// our broker adds `detail`, a sentence for the user.
//
// Decisions the spec leaves open:
//   - Our broker has no mesh display name; a membership's name is the
//     slug.
//   - A retried join with the same key answers the same membership with
//     alreadyMember and uses nothing (the store's rule), so a client that
//     lost the answer retries.
//   - The client never follows redirects: it would send the invite to a
//     host the user did not name.
//
// This package never logs invite tokens (bearer capabilities until used
// up). Join never stores the key it enrolls: the caller records it with
// config.Paths.AddMembership.
package join

import (
	"encoding/json"
	"errors"
)

// Limits.
const (
	// MaxRequestBytes bounds a join request body (upstream bounds it by
	// its message size limit); a larger one is answered 413.
	MaxRequestBytes = 64 << 10
	// MaxResponseBytes bounds the answers the client reads.
	MaxResponseBytes = 64 << 10
	// MaxDisplayNameBytes is the store's limit on a member's display name.
	MaxDisplayNameBytes = 128
	// Path is where the broker serves joins.
	Path = "/join"
)

// Error codes of a refusal (`error`): upstream's where it has one.
const (
	CodeRequired        = "invite_token, invite_payload, peer_pubkey, display_name required"
	CodeInvalidPubkey   = "peer_pubkey must be 64 hex chars (32 bytes)"
	CodeTooLarge        = "payload too large"
	CodeInvalidJSON     = "invalid_json"
	CodeInvalidName     = "invalid_display_name"
	CodeMalformed       = "invite_malformed"
	CodePayloadMismatch = "invite_payload_mismatch"
	CodeBadSignature    = "invite_bad_signature"
	CodeOwnerMismatch   = "invite_owner_mismatch"
	CodeNotFound        = "invite_not_found"
	CodeRevoked         = "invite_revoked"
	CodeExpired         = "invite_expired"
	CodeExhausted       = "invite_exhausted"
	CodeMemberRevoked   = "member_revoked"
	CodeNameTaken       = "name_taken"
	CodeMethod          = "method_not_allowed"
	CodeInternal        = "internal"
)

// Request is the body of POST /join.
type Request struct {
	InviteToken string `json:"invite_token"`
	// InvitePayload is the token's payload as a JSON object; the broker
	// refuses one that differs from the token's.
	InvitePayload json.RawMessage `json:"invite_payload"`
	PeerPubkey    string          `json:"peer_pubkey"`  // 64 hex, ed25519
	DisplayName   string          `json:"display_name"` // 1-128 bytes after trimming
}

// Response is every answer: ok with the membership, or a refusal.
type Response struct {
	OK            bool   `json:"ok"`
	MemberID      string `json:"memberId,omitempty"`
	AlreadyMember bool   `json:"alreadyMember,omitempty"`
	Error         string `json:"error,omitempty"`
	Detail        string `json:"detail,omitempty"`
}

// ErrBadInviteLink reports input that is none of the link forms.
var ErrBadInviteLink = errors.New("not a claudemesh invite link")
