package broker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Member statuses (wire protocol set_status).
const (
	StatusIdle    = "idle"
	StatusWorking = "working"
	StatusDND     = "dnd"
)

// Member is one pubkey's membership of a mesh.
type Member struct {
	ID          string
	MeshID      string
	Pubkey      string // 64 lowercase hex (ed25519)
	DisplayName string
	CreatedAt   time.Time
	RevokedAt   *time.Time // set once revoked; the WS layer closes such members with 4002
	Profile
}

// Revoked reports whether the membership was revoked.
func (m *Member) Revoked() bool { return m.RevokedAt != nil }

// Profile is what a member says about itself (set_status, set_summary,
// set_visible, set_profile).
type Profile struct {
	Status       string // StatusIdle, StatusWorking or StatusDND
	Summary      string
	Visible      bool
	Avatar       string
	Title        string
	Bio          string
	Capabilities []string
}

// ProfileUpdate changes the fields that are non-nil and leaves the others.
type ProfileUpdate struct {
	Status       *string
	Summary      *string
	Visible      *bool
	Avatar       *string
	Title        *string
	Bio          *string
	Capabilities []string // nil: unchanged; empty: cleared
}

const memberColumns = `id, mesh_id, pubkey, display_name, created_at, revoked_at,
	status, summary, visible, avatar, title, bio, capabilities`

func scanMember(row interface{ Scan(...any) error }) (*Member, error) {
	var m Member
	var caps []byte
	err := row.Scan(&m.ID, &m.MeshID, &m.Pubkey, &m.DisplayName, (*dbTime)(&m.CreatedAt), nullTime{&m.RevokedAt},
		&m.Status, &m.Summary, &m.Visible, &m.Avatar, &m.Title, &m.Bio, &caps)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrMemberNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read member: %w", err)
	}
	if err := json.Unmarshal(caps, &m.Capabilities); err != nil {
		return nil, fmt.Errorf("read member %s capabilities: %w", m.ID, err)
	}
	return &m, nil
}

// MemberByPubkey returns the membership of pubkey in the mesh, revoked or
// not, or ErrMemberNotFound.
func (s *Store) MemberByPubkey(ctx context.Context, meshID, pubkey string) (*Member, error) {
	return scanMember(s.rdb.QueryRowxContext(ctx, s.d.rewrite("SELECT "+memberColumns+
		" FROM member WHERE mesh_id = ? AND pubkey = ?"), meshID, strings.ToLower(pubkey)))
}

// Members returns the active (non-revoked) members of the mesh, oldest
// first: the peer list before presence and visibility are applied.
func (s *Store) Members(ctx context.Context, meshID string) ([]Member, error) {
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite("SELECT "+memberColumns+
		" FROM member WHERE mesh_id = ? AND revoked_at IS NULL ORDER BY created_at, id"), meshID)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	defer rows.Close()
	var out []Member
	for rows.Next() {
		m, err := scanMember(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	return out, nil
}

// RevokeMember revokes pubkey's membership. Revoking twice is a no-op; an
// unknown pubkey is ErrMemberNotFound.
func (s *Store) RevokeMember(ctx context.Context, meshID, pubkey string) error {
	res, err := s.db.ExecContext(ctx, s.d.rewrite(`UPDATE member SET revoked_at = ?
		WHERE mesh_id = ? AND pubkey = ? AND revoked_at IS NULL`), s.d.time(s.clock()), meshID, strings.ToLower(pubkey))
	if err != nil {
		return fmt.Errorf("revoke member: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("revoke member: %w", err)
	} else if n > 0 {
		return nil
	}
	if _, err := s.MemberByPubkey(ctx, meshID, pubkey); err != nil {
		return fmt.Errorf("revoke member: %w", err)
	}
	return nil
}

// RevokedSince returns the members revoked after since: a running broker
// disconnects them (the revocation may come from another process, such as
// `claudemesh broker member revoke`).
func (s *Store) RevokedSince(ctx context.Context, since time.Time) ([]Recipient, error) {
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite(
		`SELECT mesh_id, pubkey FROM member WHERE revoked_at IS NOT NULL AND revoked_at > ?`), s.d.time(since))
	if err != nil {
		return nil, fmt.Errorf("revoked members: %w", err)
	}
	defer rows.Close()
	var out []Recipient
	for rows.Next() {
		var r Recipient
		if err := rows.Scan(&r.MeshID, &r.Pubkey); err != nil {
			return nil, fmt.Errorf("revoked members: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("revoked members: %w", err)
	}
	return out, nil
}

// SetProfile applies u to the active member pubkey and returns the member
// as stored. A revoked or unknown pubkey is ErrMemberNotFound.
func (s *Store) SetProfile(ctx context.Context, meshID, pubkey string, u ProfileUpdate) (*Member, error) {
	if u.Status != nil && *u.Status != StatusIdle && *u.Status != StatusWorking && *u.Status != StatusDND {
		return nil, fmt.Errorf("%w: status must be idle, working or dnd, not %q", ErrInvalid, *u.Status)
	}
	var caps any
	if u.Capabilities != nil {
		caps = jsonArray(u.Capabilities)
	}
	var visible any
	if u.Visible != nil {
		visible = *u.Visible
	}
	m, err := scanMember(s.db.QueryRowxContext(ctx, s.d.rewrite(`UPDATE member SET
		status = COALESCE(?, status), summary = COALESCE(?, summary), visible = COALESCE(?, visible),
		avatar = COALESCE(?, avatar), title = COALESCE(?, title), bio = COALESCE(?, bio),
		capabilities = COALESCE(?, capabilities)
		WHERE mesh_id = ? AND pubkey = ? AND revoked_at IS NULL
		RETURNING `+memberColumns),
		u.Status, u.Summary, visible, u.Avatar, u.Title, u.Bio, caps, meshID, strings.ToLower(pubkey)))
	if err != nil {
		return nil, fmt.Errorf("set profile: %w", err)
	}
	return m, nil
}

// activeMember is the condition of a write only an active member may make
// (state, locks): a revocation committed before it stores nothing.
const activeMember = `EXISTS (SELECT 1 FROM member WHERE id = ? AND mesh_id = ? AND revoked_at IS NULL)`

// memberActive is nil for an active member, ErrMemberRevoked for one
// revoked or unknown: why a write conditional on activeMember wrote
// nothing.
func (s *Store) memberActive(ctx context.Context, meshID, memberID string) error {
	var n int
	if err := s.db.GetContext(ctx, &n, s.d.rewrite(`SELECT COUNT(*) FROM member WHERE id = ? AND mesh_id = ? AND revoked_at IS NULL`),
		memberID, meshID); err != nil {
		return err
	}
	if n == 0 {
		return ErrMemberRevoked
	}
	return nil
}

// queryAll runs a read query and scans each of its rows with scan.
func queryAll[T any](ctx context.Context, s *Store, scan func(interface{ Scan(...any) error }) (*T, error), query string,
	args ...any) ([]T, error) {
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, rows.Err()
}
