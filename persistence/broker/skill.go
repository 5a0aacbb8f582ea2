package broker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Skill limits.
const (
	// MaxSkillContent bounds a skill's instructions, in bytes.
	MaxSkillContent = 64 << 10
	// MaxSkillDescription bounds a description, in bytes.
	MaxSkillDescription = 1024
	// MaxSkillTags and MaxSkillTag bound the tags and each tag's bytes.
	MaxSkillTags = 16
	MaxSkillTag  = 64
	// MaxSkillQuery bounds a list_skills query, in bytes.
	MaxSkillQuery = 256
)

// Skill is one published skill of a mesh.
type Skill struct {
	Name        string
	Description string
	Content     string
	Tags        []string
	Version     int
	// PublishedBy is the publisher's pubkey, PublishedName its display
	// name at the time.
	PublishedBy   string
	PublishedName string
	PublishedAt   time.Time
}

// NewSkill is what publish_skill asks for.
type NewSkill struct {
	Name        string
	Description string
	Content     string
	Tags        []string
}

func (n *NewSkill) validate() error {
	switch {
	case !messages.ValidSkillName(n.Name):
		return fmt.Errorf("%w: a skill name is 1-64 of a-z 0-9 . _ - starting with a letter or digit, got %q", ErrInvalid, n.Name)
	case len(n.Description) > MaxSkillDescription:
		return fmt.Errorf("%w: a skill description is at most %d bytes, got %d", ErrInvalid, MaxSkillDescription, len(n.Description))
	case strings.TrimSpace(n.Content) == "":
		return fmt.Errorf("%w: a skill needs content (its instructions)", ErrInvalid)
	case len(n.Content) > MaxSkillContent:
		return fmt.Errorf("%w: skill content is %d bytes, more than the %d allowed; shorten it or split it into several skills",
			ErrInvalid, len(n.Content), MaxSkillContent)
	case !utf8.ValidString(n.Content) || !utf8.ValidString(n.Description):
		return fmt.Errorf("%w: skill content and description must be UTF-8 text", ErrInvalid)
	case len(n.Tags) > MaxSkillTags:
		return fmt.Errorf("%w: a skill has at most %d tags, got %d", ErrInvalid, MaxSkillTags, len(n.Tags))
	}
	for _, tag := range n.Tags {
		if tag == "" || len(tag) > MaxSkillTag || !utf8.ValidString(tag) || strings.ContainsFunc(tag, isControl) {
			return fmt.Errorf("%w: a skill tag is 1-%d bytes of printable text, got %q", ErrInvalid, MaxSkillTag, tag)
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// PublishSkill stores the skill under its name in the mesh, published by
// the member (who must be an active member of the mesh): version 1 for a
// new name; a name the mesh has is replaced and its version bumped. It
// returns the stored skill. Invalid fields wrap ErrInvalid, a revoked or
// unknown member is ErrMemberRevoked; either way nothing is stored.
func (s *Store) PublishSkill(ctx context.Context, meshID, memberID string, n NewSkill) (*Skill, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	tags := n.Tags
	if tags == nil {
		tags = []string{}
	}
	tagsJSON, _ := json.Marshal(tags) // []string always encodes
	res, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO skill (mesh_id, name, description, content, tags, version,
		       published_by, published_name, published_at)
		SELECT ?, ?, ?, ?, ?, 1, m.pubkey, m.display_name, ? FROM member m
		 WHERE m.id = ? AND m.mesh_id = ? AND m.revoked_at IS NULL
		ON CONFLICT (mesh_id, name) DO UPDATE SET description = excluded.description, content = excluded.content,
		       tags = excluded.tags, version = skill.version + 1, published_by = excluded.published_by,
		       published_name = excluded.published_name, published_at = excluded.published_at`),
		meshID, n.Name, n.Description, n.Content, string(tagsJSON), s.d.time(s.clock()), memberID, meshID)
	if err != nil {
		return nil, fmt.Errorf("publish skill: %w", err)
	}
	if rows, err := res.RowsAffected(); err == nil && rows == 0 {
		return nil, fmt.Errorf("publish skill: %w", ErrMemberRevoked)
	}
	return s.Skill(ctx, meshID, n.Name)
}

// ErrSkillNotFound means the mesh has no skill of that name.
var ErrSkillNotFound = errors.New("skill not found")

// RemoveSkill removes the mesh's skill of that name if the member is an
// active member of the mesh; removing a name the mesh does not have is no
// error (removed false). A revoked or unknown member is ErrMemberRevoked.
func (s *Store) RemoveSkill(ctx context.Context, meshID, memberID, name string) (removed bool, err error) {
	res, err := s.db.ExecContext(ctx, s.d.rewrite(`DELETE FROM skill WHERE mesh_id = ? AND name = ?
		   AND EXISTS (SELECT 1 FROM member m WHERE m.id = ? AND m.mesh_id = ? AND m.revoked_at IS NULL)`),
		meshID, name, memberID, meshID)
	if err != nil {
		return false, fmt.Errorf("remove skill: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	if err := s.memberActive(ctx, meshID, memberID); err != nil {
		return false, fmt.Errorf("remove skill: %w", err)
	}
	return false, nil
}

const skillSelect = `SELECT name, description, content, tags, version, published_by, published_name, published_at FROM skill`

func scanSkill(row interface{ Scan(...any) error }) (*Skill, error) {
	var sk Skill
	var tags string
	if err := row.Scan(&sk.Name, &sk.Description, &sk.Content, &tags, &sk.Version, &sk.PublishedBy, &sk.PublishedName,
		(*dbTime)(&sk.PublishedAt)); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tags), &sk.Tags); err != nil {
		return nil, fmt.Errorf("skill %q tags: %w", sk.Name, err)
	}
	return &sk, nil
}

// Skill returns the mesh's skill of that name, or ErrSkillNotFound.
func (s *Store) Skill(ctx context.Context, meshID, name string) (*Skill, error) {
	sk, err := scanSkill(s.rdb.QueryRowxContext(ctx, s.d.rewrite(skillSelect+` WHERE mesh_id = ? AND name = ?`), meshID, name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, ErrSkillNotFound
	case err != nil:
		return nil, fmt.Errorf("read skill: %w", err)
	}
	return sk, nil
}

// Skills lists the mesh's skills by name; a query other than "" keeps
// those whose name or description contains it, ignoring case. The query
// is text: LIKE's wildcards in it match themselves. A query over
// MaxSkillQuery bytes wraps ErrInvalid.
func (s *Store) Skills(ctx context.Context, meshID, query string) ([]Skill, error) {
	if len(query) > MaxSkillQuery {
		return nil, fmt.Errorf("%w: a skill query is at most %d bytes", ErrInvalid, MaxSkillQuery)
	}
	pattern := "%" + likeEscaper.Replace(strings.ToLower(query)) + "%"
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite(skillSelect+` WHERE mesh_id = ?
		   AND (lower(name) LIKE ? ESCAPE '\' OR lower(description) LIKE ? ESCAPE '\') ORDER BY name`), meshID, pattern, pattern)
	if err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	defer rows.Close()
	out := []Skill{}
	for rows.Next() {
		sk, err := scanSkill(rows)
		if err != nil {
			return nil, fmt.Errorf("list skills: %w", err)
		}
		out = append(out, *sk)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	return out, nil
}

// likeEscaper makes text match itself in a LIKE pattern with ESCAPE '\'.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
