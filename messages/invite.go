package messages

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A v1 invite (wire-protocol §3.7) is a payload signed by the mesh owner's
// ed25519 key, carried as its token: base64url without padding of the
// payload's JSON, keys in the order of InvitePayload's fields (the upstream
// CLI's JSON.stringify). The broker that issued it keeps the token's hash;
// any CLI can check the token offline (DecodeInviteToken, then Verify).

// InviteVersion is the only payload version there is.
const InviteVersion = 1

// MaxInviteTokenBytes bounds a token: a payload with a 64-byte slug and a
// long broker URL is well under 2 KiB.
const MaxInviteTokenBytes = 4096

// Invite roles.
const (
	InviteRoleAdmin  = "admin"
	InviteRoleMember = "member"
)

// Errors DecodeInviteToken and Verify return, wrapped with the detail.
var (
	// ErrInviteMalformed: the token is not base64url JSON, or a field is
	// missing or of the wrong type or value.
	ErrInviteMalformed = errors.New("malformed invite")
	// ErrInviteExpired: expires_at is past.
	ErrInviteExpired = errors.New("invite expired")
	// ErrInviteSignature: the signature does not verify under owner_pubkey
	// (the payload was changed after signing, or signed by another key).
	ErrInviteSignature = errors.New("invite signature invalid (link tampered?)")
)

// InvitePayload is the signed content of a v1 invite. The field order is
// the token's key order.
type InvitePayload struct {
	V           int    `json:"v"`
	MeshID      string `json:"mesh_id"`
	MeshSlug    string `json:"mesh_slug"`
	BrokerURL   string `json:"broker_url"`    // ws(s)://…/ws
	ExpiresAt   int64  `json:"expires_at"`    // unix seconds
	MeshRootKey string `json:"mesh_root_key"` // 32 bytes, base64url
	Role        string `json:"role"`          // InviteRoleAdmin or InviteRoleMember
	OwnerPubkey string `json:"owner_pubkey"`  // 64 hex
	Signature   string `json:"signature"`     // 128 hex
}

// Canonical is the string the owner signs:
// v|mesh_id|mesh_slug|broker_url|expires_at|mesh_root_key|role|owner_pubkey.
func (p *InvitePayload) Canonical() string {
	return strings.Join([]string{strconv.Itoa(p.V), p.MeshID, p.MeshSlug, p.BrokerURL,
		strconv.FormatInt(p.ExpiresAt, 10), p.MeshRootKey, p.Role, p.OwnerPubkey}, "|")
}

// SignInvite sets p's OwnerPubkey and Signature from owner and returns the
// token.
func SignInvite(p InvitePayload, owner ed25519.PrivateKey) (string, *InvitePayload, error) {
	p.V = InviteVersion
	p.OwnerPubkey = hex.EncodeToString(owner.Public().(ed25519.PublicKey))
	p.Signature = hex.EncodeToString(ed25519.Sign(owner, []byte(p.Canonical())))
	if err := p.checkShape(); err != nil {
		return "", nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as JSON.stringify
	if err := enc.Encode(&p); err != nil {
		return "", nil, fmt.Errorf("encode invite: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), &p, nil
}

// invitePayloadJSON is the decoding form: a missing field stays nil.
type invitePayloadJSON struct {
	V           *int    `json:"v"`
	MeshID      *string `json:"mesh_id"`
	MeshSlug    *string `json:"mesh_slug"`
	BrokerURL   *string `json:"broker_url"`
	ExpiresAt   *int64  `json:"expires_at"`
	MeshRootKey *string `json:"mesh_root_key"`
	Role        *string `json:"role"`
	OwnerPubkey *string `json:"owner_pubkey"`
	Signature   *string `json:"signature"`
}

// DecodeInviteToken decodes a token and checks its shape, in the upstream
// CLI's order: base64, JSON, then every field. It does not check expiry
// or the signature (Verify does). Errors wrap ErrInviteMalformed.
func DecodeInviteToken(token string) (*InvitePayload, error) {
	if len(token) > MaxInviteTokenBytes {
		return nil, fmt.Errorf("%w: the token is longer than %d characters", ErrInviteMalformed, MaxInviteTokenBytes)
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, fmt.Errorf("%w: invite link base64 decode failed: %w", ErrInviteMalformed, err)
	}
	return DecodeInvitePayload(raw)
}

// DecodeInvitePayload decodes a payload's JSON and checks its shape.
// Errors wrap ErrInviteMalformed.
func DecodeInvitePayload(raw []byte) (*InvitePayload, error) {
	var in invitePayloadJSON
	if err := json.Unmarshal(raw, &in); err != nil {
		if _, isType := errors.AsType[*json.UnmarshalTypeError](err); isType && json.Valid(raw) {
			return nil, fmt.Errorf("%w: invite payload: %w", ErrInviteMalformed, err)
		}
		return nil, fmt.Errorf("%w: invite link JSON parse failed: %w", ErrInviteMalformed, err)
	}
	if in.V == nil || in.MeshID == nil || in.MeshSlug == nil || in.BrokerURL == nil || in.ExpiresAt == nil ||
		in.MeshRootKey == nil || in.Role == nil || in.OwnerPubkey == nil || in.Signature == nil {
		return nil, fmt.Errorf("%w: invite payload: v, mesh_id, mesh_slug, broker_url, expires_at, mesh_root_key, role, owner_pubkey and signature are all required", ErrInviteMalformed)
	}
	p := &InvitePayload{V: *in.V, MeshID: *in.MeshID, MeshSlug: *in.MeshSlug, BrokerURL: *in.BrokerURL,
		ExpiresAt: *in.ExpiresAt, MeshRootKey: *in.MeshRootKey, Role: *in.Role, OwnerPubkey: *in.OwnerPubkey,
		Signature: *in.Signature}
	if err := p.checkShape(); err != nil {
		return nil, err
	}
	return p, nil
}

var (
	hex64  = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	hex128 = regexp.MustCompile(`^[0-9a-fA-F]{128}$`)
)

// checkShape is the upstream CLI's validatePayload.
func (p *InvitePayload) checkShape() error {
	var problem string
	switch {
	case p.V != InviteVersion:
		problem = "v must be 1"
	case p.MeshID == "":
		problem = "mesh_id required"
	case p.MeshSlug == "":
		problem = "mesh_slug required"
	case p.BrokerURL == "":
		problem = "broker_url required"
	case p.ExpiresAt <= 0:
		problem = "expires_at must be a positive number"
	case p.MeshRootKey == "":
		problem = "mesh_root_key required"
	case p.Role != InviteRoleAdmin && p.Role != InviteRoleMember:
		problem = "role must be admin or member"
	case !hex64.MatchString(p.OwnerPubkey):
		problem = "owner_pubkey must be 64 hex chars"
	case !hex128.MatchString(p.Signature):
		problem = "signature must be 128 hex chars"
	default:
		return nil
	}
	return fmt.Errorf("%w: invite payload: %s", ErrInviteMalformed, problem)
}

// Verify checks that the invite has not expired at now and that its
// signature verifies under its owner_pubkey. Errors wrap ErrInviteExpired
// or ErrInviteSignature.
func (p *InvitePayload) Verify(now time.Time) error {
	if p.ExpiresAt < now.Unix() {
		return fmt.Errorf("%w: it expired at %s", ErrInviteExpired, time.Unix(p.ExpiresAt, 0).UTC().Format(time.RFC3339))
	}
	return p.VerifySignature()
}

// VerifySignature checks the signature alone. Errors wrap
// ErrInviteSignature.
func (p *InvitePayload) VerifySignature() error {
	pub, errKey := hex.DecodeString(p.OwnerPubkey)
	sig, errSig := hex.DecodeString(p.Signature)
	if errKey != nil || errSig != nil || len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize ||
		!ed25519.Verify(pub, []byte(p.Canonical()), sig) {
		return ErrInviteSignature
	}
	return nil
}
