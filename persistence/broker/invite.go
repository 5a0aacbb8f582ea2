package broker

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Errors of the invite path (errors.Is). A token that does not decode
// wraps messages.ErrInviteMalformed, one whose signature fails
// messages.ErrInviteSignature.
var (
	ErrInviteUnknown = errors.New("invite token unknown")
	ErrInviteExpired = errors.New("invite expired")
	ErrInviteUsedUp  = errors.New("invite has no uses left")
	ErrInviteRevoked = errors.New("invite revoked")
	// ErrInviteOwnerMismatch: the token was issued here, but its payload no
	// longer names this mesh's owner key and id.
	ErrInviteOwnerMismatch = errors.New("invite not signed by the mesh owner")
)

// Invite defaults (upstream's).
const (
	DefaultInviteTTL  = 7 * 24 * time.Hour
	DefaultInviteUses = 1
)

// InviteRequest is what CreateInvite signs.
type InviteRequest struct {
	MeshSlug  string
	BrokerURL string // the ws(s)://…/ws URL joiners connect to
	Role      string // messages.InviteRoleAdmin or InviteRoleMember; "" is member
	Uses      int    // ≥ 1
	TTL       time.Duration
}

// Invite is an issued invite. Token and Payload are set only by
// CreateInvite: the store keeps the token's SHA-256, not the token.
type Invite struct {
	ID        string // ULID
	Token     string
	Payload   *messages.InvitePayload
	MeshID    string
	MeshSlug  string
	Role      string
	MaxUses   int
	UsesLeft  int
	ExpiresAt time.Time // whole seconds, as the payload's expires_at
	CreatedAt time.Time
	RevokedAt *time.Time
}

// ownerKey is a mesh's signing key and root key.
type ownerKey struct {
	pubkey  string // 64 hex, lowercase
	secret  ed25519.PrivateKey
	rootKey []byte
}

// CreateInvite signs a v1 invite to the mesh with its owner key (made now
// if the mesh has none) and records it with its uses and expiry.
func (s *Store) CreateInvite(ctx context.Context, req InviteRequest) (*Invite, error) {
	if req.Role == "" {
		req.Role = messages.InviteRoleMember
	}
	switch {
	case req.Uses < 1 || req.TTL < time.Second:
		return nil, fmt.Errorf("%w: an invite needs at least one use and a lifetime of at least a second", ErrInvalid)
	case req.Role != messages.InviteRoleAdmin && req.Role != messages.InviteRoleMember:
		return nil, fmt.Errorf("%w: role %q must be admin or member", ErrInvalid, req.Role)
	case !validBrokerWS(req.BrokerURL):
		return nil, fmt.Errorf("%w: broker URL %q must be ws:// or wss:// with a host", ErrInvalid, req.BrokerURL)
	}
	mesh, err := s.MeshBySlug(ctx, req.MeshSlug)
	if err != nil {
		return nil, err
	}
	key, err := s.meshOwnerKey(ctx, mesh.ID)
	if err != nil {
		return nil, err
	}
	now := s.clock()
	inv := &Invite{ID: ulid.Make().String(), MeshID: mesh.ID, MeshSlug: mesh.Slug, Role: req.Role,
		MaxUses: req.Uses, UsesLeft: req.Uses, CreatedAt: now}
	// Signatures are deterministic: two invites alike but for their id
	// would be one token. The later one expires a second earlier.
	for early := range maxSameSecondInvites {
		inv.ExpiresAt = now.Add(req.TTL).Truncate(time.Second).Add(-time.Duration(early) * time.Second)
		inv.Token, inv.Payload, err = messages.SignInvite(messages.InvitePayload{MeshID: mesh.ID, MeshSlug: mesh.Slug,
			BrokerURL: req.BrokerURL, ExpiresAt: inv.ExpiresAt.Unix(), MeshRootKey: base64.RawURLEncoding.EncodeToString(key.rootKey),
			Role: req.Role}, key.secret)
		if err != nil {
			return nil, err
		}
		hash := sha256.Sum256([]byte(inv.Token))
		res, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO invite
			(id, token_hash, mesh_id, role, max_uses, uses_left, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (token_hash) DO NOTHING`),
			inv.ID, hash[:], mesh.ID, inv.Role, inv.MaxUses, inv.UsesLeft, s.d.time(inv.ExpiresAt), s.d.time(now))
		if err != nil {
			return nil, fmt.Errorf("store invite: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("store invite: %w", err)
		} else if n == 1 {
			return inv, nil
		}
	}
	return nil, fmt.Errorf("%w: %d invites alike were made this second; wait a second", ErrInvalid, maxSameSecondInvites)
}

// maxSameSecondInvites bounds the invites alike (mesh, broker URL, role,
// lifetime) made in one second.
const maxSameSecondInvites = 60

func validBrokerWS(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "ws" || u.Scheme == "wss") && u.Host != "" && u.User == nil
}

// meshOwnerKey returns the mesh's owner key, making it first if the mesh
// has none; replicas racing to make one agree on the first written.
func (s *Store) meshOwnerKey(ctx context.Context, meshID string) (*ownerKey, error) {
	key, err := s.readOwnerKey(ctx, meshID)
	if !errors.Is(err, sql.ErrNoRows) {
		return key, err
	}
	pub, secret, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make mesh owner key: %w", err)
	}
	root := make([]byte, 32)
	rand.Read(root)
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO mesh_owner_key
		(mesh_id, owner_pubkey, owner_secret_key, root_key, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (mesh_id) DO NOTHING`), meshID, hex.EncodeToString(pub), secret.Seed(), root, s.d.time(s.clock())); err != nil {
		return nil, fmt.Errorf("store mesh owner key: %w", err)
	}
	return s.readOwnerKey(ctx, meshID)
}

func (s *Store) readOwnerKey(ctx context.Context, meshID string) (*ownerKey, error) {
	var row struct {
		Pubkey  string `db:"owner_pubkey"`
		Seed    []byte `db:"owner_secret_key"`
		RootKey []byte `db:"root_key"`
	}
	err := s.db.GetContext(ctx, &row, s.d.rewrite(`SELECT owner_pubkey, owner_secret_key, root_key
		FROM mesh_owner_key WHERE mesh_id = ?`), meshID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("read mesh owner key: %w", err)
	case len(row.Seed) != ed25519.SeedSize:
		return nil, fmt.Errorf("mesh %s: the stored owner key is %d bytes, not an ed25519 seed", meshID, len(row.Seed))
	}
	return &ownerKey{pubkey: row.Pubkey, secret: ed25519.NewKeyFromSeed(row.Seed), rootKey: row.RootKey}, nil
}

const inviteColumns = `i.id, i.mesh_id, m.slug, i.role, i.max_uses, i.uses_left, i.expires_at, i.created_at, i.revoked_at`

// Invites lists the mesh's invites, oldest first, revoked and spent ones
// included.
func (s *Store) Invites(ctx context.Context, meshSlug string) ([]Invite, error) {
	mesh, err := s.MeshBySlug(ctx, meshSlug)
	if err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite(`SELECT `+inviteColumns+` FROM invite i
		JOIN mesh m ON m.id = i.mesh_id WHERE i.mesh_id = ? ORDER BY i.created_at, i.id`), mesh.ID)
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	defer rows.Close()
	var out []Invite
	for rows.Next() {
		var inv Invite
		if err := rows.Scan(&inv.ID, &inv.MeshID, &inv.MeshSlug, &inv.Role, &inv.MaxUses, &inv.UsesLeft,
			(*dbTime)(&inv.ExpiresAt), (*dbTime)(&inv.CreatedAt), nullTime{&inv.RevokedAt}); err != nil {
			return nil, fmt.Errorf("list invites: %w", err)
		}
		out = append(out, inv)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	return out, nil
}

// RevokeInvite revokes the mesh's invite with this id: it joins no one
// from now on. Revoking a revoked invite is not an error.
func (s *Store) RevokeInvite(ctx context.Context, meshSlug, id string) error {
	mesh, err := s.MeshBySlug(ctx, meshSlug)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, s.d.rewrite(`UPDATE invite SET revoked_at = COALESCE(revoked_at, ?)
		WHERE mesh_id = ? AND id = ?`), s.d.time(s.clock()), mesh.ID, strings.ToUpper(id))
	if err != nil {
		return fmt.Errorf("revoke invite: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("revoke invite: %w", err)
	} else if n == 0 {
		return fmt.Errorf("revoke invite %s: %w", id, ErrInviteUnknown)
	}
	return nil
}

// Redemption is what RedeemInvite did.
type Redemption struct {
	Member *Member
	Mesh   *Mesh
	// AlreadyMember: the pubkey was an active member already; no use of
	// the invite was consumed.
	AlreadyMember bool
}

// RedeemInvite joins pubkey to the invite's mesh under displayName with
// the invite's role and uses up one use of it, atomically. It re-verifies
// the token's signature and that it names the mesh's owner key, then
// fails with ErrInviteUnknown, ErrInviteRevoked, ErrInviteExpired,
// ErrMemberRevoked, ErrInviteUsedUp, or a *NameTakenError when an active
// member's name reads the same (messages.NameKey); nothing is consumed
// then. A pubkey that is already an active member gets its membership
// back and consumes nothing.
func (s *Store) RedeemInvite(ctx context.Context, token, pubkey, displayName string) (*Redemption, error) {
	pubkey, displayName = strings.ToLower(pubkey), strings.TrimSpace(displayName)
	if !pubkeyPattern.MatchString(pubkey) {
		return nil, fmt.Errorf("%w: pubkey must be 64 hex characters", ErrInvalid)
	}
	if displayName == "" || len(displayName) > 128 {
		return nil, fmt.Errorf("%w: display name must be 1-128 bytes", ErrInvalid)
	}
	key, err := nameKeyOf(displayName)
	if err != nil {
		return nil, err
	}
	payload, err := messages.DecodeInviteToken(token)
	if err != nil {
		return nil, err
	}
	if err := payload.VerifySignature(); err != nil {
		return nil, err
	}
	var out Redemption
	err = s.inTx(ctx, func(tx *sqlx.Tx) (err error) {
		out.Member, out.AlreadyMember, err = s.redeem(ctx, tx, token, payload, pubkey, displayName, key)
		if err != nil {
			return err
		}
		out.Mesh, err = scanMesh(tx.QueryRowxContext(ctx, s.d.rewrite("SELECT "+meshColumns+" FROM mesh WHERE id = ?"), out.Member.MeshID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redeem invite: %w", err)
	}
	return &out, nil
}

// issuedInvite is the row of the invite a token names, and its mesh's
// owner key.
type issuedInvite struct {
	ID          string  `db:"id"`
	MeshID      string  `db:"mesh_id"`
	Role        string  `db:"role"`
	ExpiresAt   dbTime  `db:"expires_at"`
	RevokedAt   *dbTime `db:"revoked_at"`
	OwnerPubkey string  `db:"owner_pubkey"`
}

func (s *Store) redeem(ctx context.Context, tx *sqlx.Tx, token string, payload *messages.InvitePayload,
	pubkey, displayName, nameKey string) (m *Member, already bool, err error) {
	hash := sha256.Sum256([]byte(token))
	var inv issuedInvite
	err = tx.GetContext(ctx, &inv, s.d.rewrite(`SELECT i.id, i.mesh_id, i.role, i.expires_at, i.revoked_at, k.owner_pubkey
		FROM invite i JOIN mesh_owner_key k ON k.mesh_id = i.mesh_id
		WHERE i.token_hash = ? /*FOR UPDATE*/`), hash[:])
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, ErrInviteUnknown
	}
	if err != nil {
		return nil, false, fmt.Errorf("read invite: %w", err)
	}
	now := s.clock()
	switch {
	case inv.OwnerPubkey != strings.ToLower(payload.OwnerPubkey) || inv.MeshID != payload.MeshID:
		return nil, false, ErrInviteOwnerMismatch
	case inv.RevokedAt != nil:
		return nil, false, ErrInviteRevoked
	case !now.Before(time.Time(inv.ExpiresAt)):
		return nil, false, ErrInviteExpired
	}
	existing, err := scanMember(tx.QueryRowxContext(ctx, s.d.rewrite("SELECT "+memberColumns+
		" FROM member WHERE mesh_id = ? AND pubkey = ?"), inv.MeshID, pubkey))
	switch {
	case err == nil && existing.Revoked():
		return nil, false, ErrMemberRevoked
	case err == nil:
		return existing, true, nil
	case !errors.Is(err, ErrMemberNotFound):
		return nil, false, err
	}
	if holder, err := nameHolder(ctx, tx, s.d, inv.MeshID, nameKey, pubkey); err != nil {
		return nil, false, err
	} else if holder != "" {
		return nil, false, &NameTakenError{Name: displayName, Holder: holder}
	}
	res, err := tx.ExecContext(ctx, s.d.rewrite("UPDATE invite SET uses_left = uses_left - 1 WHERE id = ? AND uses_left > 0"), inv.ID)
	if err != nil {
		return nil, false, fmt.Errorf("use invite: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, false, fmt.Errorf("use invite: %w", err)
	} else if n == 0 {
		return nil, false, ErrInviteUsedUp
	}
	m = &Member{ID: ulid.Make().String(), MeshID: inv.MeshID, Pubkey: pubkey, DisplayName: displayName,
		CreatedAt: now, Profile: Profile{Status: StatusIdle, Visible: true, Capabilities: []string{}}}
	res, err = tx.ExecContext(ctx, s.d.rewrite(`INSERT INTO member (id, mesh_id, pubkey, display_name, created_at, name_key, role)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (mesh_id, pubkey) DO NOTHING`),
		m.ID, m.MeshID, m.Pubkey, m.DisplayName, s.d.time(now), nameKey, inv.Role)
	if isNameKeyConflict(err) {
		return nil, false, &NameTakenError{Name: displayName}
	}
	if err != nil {
		return nil, false, fmt.Errorf("insert member: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, false, fmt.Errorf("insert member: %w", err)
	} else if n == 0 {
		return nil, false, errors.New("the pubkey joined through another invite at the same moment; retry")
	}
	return m, false, nil
}
