package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/jmoiron/sqlx"
	"github.com/oklog/ulid/v2"
)

// Errors callers branch on. Validation failures wrap ErrInvalid.
var (
	ErrInvalid        = errors.New("invalid argument")
	ErrMeshExists     = errors.New("mesh slug already taken")
	ErrMeshNotFound   = errors.New("mesh not found")
	ErrMemberNotFound = errors.New("no active member with this pubkey in the mesh")
	ErrMemberRevoked  = errors.New("member revoked")
	ErrInviteUnknown  = errors.New("invite token unknown")
	ErrInviteExpired  = errors.New("invite expired")
	ErrInviteUsedUp   = errors.New("invite has no uses left")
)

// Mesh defaults (spec §15.1 feature params).
const (
	DedupeRetentionScoped      = "retention_scoped"
	DedupePermanent            = "permanent"
	DefaultDedupeRetentionDays = 365
	MinDedupeRetentionDays     = 3
	DefaultMaxPayloadBytes     = 65536
	MinMaxPayloadBytes         = 1024
)

var pubkeyPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Mesh is one mesh and its delivery-contract parameters.
type Mesh struct {
	ID                  string
	Slug                string // 1–64 of [a-z0-9_-], starting with a letter or digit
	CreatedAt           time.Time
	DedupeMode          string // DedupeRetentionScoped or DedupePermanent
	DedupeRetentionDays int    // ≥ 3; ignored when permanent
	MaxPayloadBytes     int
}

const meshColumns = "id, slug, created_at, dedupe_mode, dedupe_retention_days, max_payload_bytes"

func scanMesh(row interface{ Scan(...any) error }) (*Mesh, error) {
	var m Mesh
	err := row.Scan(&m.ID, &m.Slug, (*dbTime)(&m.CreatedAt), &m.DedupeMode, &m.DedupeRetentionDays, &m.MaxPayloadBytes)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrMeshNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read mesh: %w", err)
	}
	return &m, nil
}

// CreateMesh creates a mesh from m.Slug and the optional parameters of m
// (zero values take the defaults). CreatedAt is assigned, and ID unless
// given (only the daemon's embedded broker gives one: its membership
// already names the mesh).
func (s *Store) CreateMesh(ctx context.Context, m Mesh) (*Mesh, error) {
	if m.DedupeMode == "" {
		m.DedupeMode = DedupeRetentionScoped
	}
	if m.DedupeRetentionDays == 0 {
		m.DedupeRetentionDays = DefaultDedupeRetentionDays
	}
	if m.MaxPayloadBytes == 0 {
		m.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	switch {
	case !config.ValidSlug(m.Slug):
		return nil, fmt.Errorf("%w: mesh slug %q must be 1-64 of a-z, 0-9, _ and -", ErrInvalid, m.Slug)
	case m.DedupeMode != DedupeRetentionScoped && m.DedupeMode != DedupePermanent:
		return nil, fmt.Errorf("%w: dedupe mode %q", ErrInvalid, m.DedupeMode)
	case m.DedupeRetentionDays < MinDedupeRetentionDays:
		return nil, fmt.Errorf("%w: dedupe retention must be at least %d days", ErrInvalid, MinDedupeRetentionDays)
	case m.MaxPayloadBytes < MinMaxPayloadBytes:
		return nil, fmt.Errorf("%w: max payload must be at least %d bytes", ErrInvalid, MinMaxPayloadBytes)
	}
	if m.ID == "" {
		m.ID = ulid.Make().String()
	}
	m.CreatedAt = s.clock()
	res, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO mesh (`+meshColumns+`)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (slug) DO NOTHING`),
		m.ID, m.Slug, s.d.time(m.CreatedAt), m.DedupeMode, m.DedupeRetentionDays, m.MaxPayloadBytes)
	if err != nil {
		return nil, fmt.Errorf("create mesh %s: %w", m.Slug, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("create mesh %s: %w", m.Slug, err)
	} else if n == 0 {
		return nil, fmt.Errorf("create mesh %s: %w", m.Slug, ErrMeshExists)
	}
	return &m, nil
}

// MeshBySlug returns the mesh named slug, or ErrMeshNotFound.
func (s *Store) MeshBySlug(ctx context.Context, slug string) (*Mesh, error) {
	return scanMesh(s.rdb.QueryRowxContext(ctx, s.d.rewrite("SELECT "+meshColumns+" FROM mesh WHERE slug = ?"), slug))
}

// MeshByID returns the mesh with this id, or ErrMeshNotFound.
func (s *Store) MeshByID(ctx context.Context, id string) (*Mesh, error) {
	return scanMesh(s.rdb.QueryRowxContext(ctx, s.d.rewrite("SELECT "+meshColumns+" FROM mesh WHERE id = ?"), id))
}

// Invite is a freshly minted invite. Token is shown once; only its SHA-256
// is stored.
type Invite struct {
	Token     string // 32 random bytes, base64url without padding
	MeshID    string
	MeshSlug  string
	UsesLeft  int
	ExpiresAt time.Time
}

// CreateInvite mints an invite to the mesh that joins up to uses members
// until ttl from now.
func (s *Store) CreateInvite(ctx context.Context, meshSlug string, uses int, ttl time.Duration) (*Invite, error) {
	if uses < 1 || ttl <= 0 {
		return nil, fmt.Errorf("%w: an invite needs at least one use and a positive lifetime", ErrInvalid)
	}
	mesh, err := s.MeshBySlug(ctx, meshSlug)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("mint invite token: %w", err)
	}
	now := s.clock()
	inv := &Invite{Token: base64.RawURLEncoding.EncodeToString(raw), MeshID: mesh.ID, MeshSlug: mesh.Slug,
		UsesLeft: uses, ExpiresAt: now.Add(ttl).Truncate(time.Millisecond)}
	hash := sha256.Sum256([]byte(inv.Token))
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO invite (token_hash, mesh_id, uses_left, expires_at, created_at)
		VALUES (?, ?, ?, ?, ?)`), hash[:], mesh.ID, uses, s.d.time(inv.ExpiresAt), s.d.time(now)); err != nil {
		return nil, fmt.Errorf("store invite: %w", err)
	}
	return inv, nil
}

// RedeemInvite joins pubkey to the invite's mesh under displayName and uses
// up one use of the invite, atomically. It fails with ErrInviteUnknown,
// ErrInviteExpired, ErrInviteUsedUp, ErrMemberRevoked, or a
// *NameTakenError when an active member's name reads the same
// (messages.NameKey; nothing is consumed then). A pubkey that is already an
// active member gets its existing membership back and no use is consumed.
func (s *Store) RedeemInvite(ctx context.Context, token, pubkey, displayName string) (*Member, *Mesh, error) {
	pubkey, displayName = strings.ToLower(pubkey), strings.TrimSpace(displayName)
	if !pubkeyPattern.MatchString(pubkey) {
		return nil, nil, fmt.Errorf("%w: pubkey must be 64 hex characters", ErrInvalid)
	}
	if displayName == "" || len(displayName) > 128 {
		return nil, nil, fmt.Errorf("%w: display name must be 1-128 bytes", ErrInvalid)
	}
	key, err := nameKeyOf(displayName)
	if err != nil {
		return nil, nil, err
	}
	var member *Member
	var mesh *Mesh
	err = s.inTx(ctx, func(tx *sqlx.Tx) (err error) {
		member, err = s.redeem(ctx, tx, token, pubkey, displayName, key)
		if err != nil {
			return err
		}
		mesh, err = scanMesh(tx.QueryRowxContext(ctx, s.d.rewrite("SELECT "+meshColumns+" FROM mesh WHERE id = ?"), member.MeshID))
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("redeem invite: %w", err)
	}
	return member, mesh, nil
}

func (s *Store) redeem(ctx context.Context, tx *sqlx.Tx, token, pubkey, displayName, nameKey string) (*Member, error) {
	hash := sha256.Sum256([]byte(token))
	var inv struct {
		MeshID    string `db:"mesh_id"`
		ExpiresAt dbTime `db:"expires_at"`
	}
	err := tx.GetContext(ctx, &inv, s.d.rewrite(`SELECT mesh_id, expires_at FROM invite
		WHERE token_hash = ? /*FOR UPDATE*/`), hash[:])
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrInviteUnknown
	}
	if err != nil {
		return nil, fmt.Errorf("read invite: %w", err)
	}
	now := s.clock()
	if !now.Before(time.Time(inv.ExpiresAt)) {
		return nil, ErrInviteExpired
	}
	existing, err := scanMember(tx.QueryRowxContext(ctx, s.d.rewrite("SELECT "+memberColumns+
		" FROM member WHERE mesh_id = ? AND pubkey = ?"), inv.MeshID, pubkey))
	switch {
	case err == nil && existing.Revoked():
		return nil, ErrMemberRevoked
	case err == nil:
		return existing, nil
	case !errors.Is(err, ErrMemberNotFound):
		return nil, err
	}
	if holder, err := nameHolder(ctx, tx, s.d, inv.MeshID, nameKey, pubkey); err != nil {
		return nil, err
	} else if holder != "" {
		return nil, &NameTakenError{Name: displayName, Holder: holder}
	}
	res, err := tx.ExecContext(ctx, s.d.rewrite("UPDATE invite SET uses_left = uses_left - 1 WHERE token_hash = ? AND uses_left > 0"), hash[:])
	if err != nil {
		return nil, fmt.Errorf("use invite: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("use invite: %w", err)
	} else if n == 0 {
		return nil, ErrInviteUsedUp
	}
	m := &Member{ID: ulid.Make().String(), MeshID: inv.MeshID, Pubkey: pubkey, DisplayName: displayName,
		CreatedAt: now, Profile: Profile{Status: StatusIdle, Visible: true, Capabilities: []string{}}}
	res, err = tx.ExecContext(ctx, s.d.rewrite(`INSERT INTO member (id, mesh_id, pubkey, display_name, created_at, name_key)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (mesh_id, pubkey) DO NOTHING`), m.ID, m.MeshID, m.Pubkey, m.DisplayName, s.d.time(now), nameKey)
	if isNameKeyConflict(err) {
		return nil, &NameTakenError{Name: displayName}
	}
	if err != nil {
		return nil, fmt.Errorf("insert member: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("insert member: %w", err)
	} else if n == 0 {
		return nil, errors.New("the pubkey joined through another invite at the same moment; retry")
	}
	return m, nil
}

// AddMember registers a member directly, with the given id, without an
// invite: the daemon's embedded broker registers its own local identities so.
// An existing member with this pubkey is returned as it is. These are the
// machine owner's own agents, named by their slugs: one whose name reads
// the same as another's (agent0, agento) is still registered, without
// holding its name (logged; `claudemesh send` refuses the ambiguity and
// `broker member list` reports it), rather than keep the daemon from
// starting.
func (s *Store) AddMember(ctx context.Context, meshID, memberID, pubkey, displayName string) (*Member, error) {
	if m, err := s.MemberByPubkey(ctx, meshID, pubkey); err == nil {
		return m, nil
	}
	var key any
	if k := messages.NameKey(displayName); k != "" {
		holder, err := nameHolder(ctx, s.db, s.d, meshID, k, pubkey)
		switch {
		case err != nil:
			return nil, fmt.Errorf("add member: %w", err)
		case holder != "":
			s.log.Warn("member_name_lookalike", "mesh_id", meshID, "member_id", memberID, "name", displayName, "holder", holder)
		default:
			key = k
		}
	}
	now := s.clock()
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO member (id, mesh_id, pubkey, display_name, created_at, name_key)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (mesh_id, pubkey) DO NOTHING`), memberID, meshID, pubkey, displayName, s.d.time(now), key); err != nil {
		return nil, fmt.Errorf("add member: %w", err)
	}
	return s.MemberByPubkey(ctx, meshID, pubkey)
}
