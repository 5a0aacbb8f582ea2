package broker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/oklog/ulid/v2"
)

// Errors callers branch on. Validation failures wrap ErrInvalid.
var (
	ErrInvalid        = errors.New("invalid argument")
	ErrMeshExists     = errors.New("mesh slug already taken")
	ErrMeshNotFound   = errors.New("mesh not found")
	ErrMemberNotFound = errors.New("no active member with this pubkey in the mesh")
	ErrMemberRevoked  = errors.New("member revoked")
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
	case !messages.ValidSlug(m.Slug):
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
