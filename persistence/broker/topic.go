package broker

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Topic visibilities and member roles (wire protocol §2.7). Visibility is
// recorded and listed, not enforced, as upstream does.
const (
	VisibilityPublic  = "public"
	VisibilityPrivate = "private"
	VisibilityDM      = "dm"
	RoleLead          = "lead"
	RoleMember        = "member"
	RoleObserver      = "observer"
)

// Topic limits.
const (
	// TopicIDLength is the length of a topic id: upstream's generateId, 32
	// random [0-9A-Za-z].
	TopicIDLength = 32
	// MaxTopicDescription bounds a description, in bytes.
	MaxTopicDescription = 1024
	// DefaultTopicHistory and MaxTopicHistory bound a history page.
	DefaultTopicHistory = 50
	MaxTopicHistory     = 500
)

// ErrTopicNotFound means no topic of the mesh has that id or name.
var ErrTopicNotFound = errors.New("topic not found")

// Topic is one topic of a mesh.
type Topic struct {
	ID          string
	MeshID      string
	Name        string
	Description string
	Visibility  string
	CreatedBy   string // member id
	CreatedAt   time.Time
	MemberCount int // active members joined
}

// TopicMember is one member joined to a topic.
type TopicMember struct {
	MemberID    string
	Pubkey      string
	DisplayName string
	Role        string
	JoinedAt    time.Time
	LastReadAt  *time.Time // nil until topic_mark_read
}

// TopicMessage is one message of a topic's history.
type TopicMessage struct {
	ID             string // the broker_message_id
	SenderPubkey   string
	SenderMemberID string // "" when the sender is a session key
	SenderName     string // as the accept stored it: a session's own, else its member's (AcceptRequest)
	Nonce          string
	Ciphertext     string
	ReplyToID      string
	CreatedAt      time.Time
}

// NewTopic is what topic_create asks for.
type NewTopic struct {
	Name        string
	Description string
	Visibility  string // "" is public
}

func (t *NewTopic) validate() error {
	if _, err := messages.ParseDestination("#" + t.Name); err != nil || len(t.Name) == 0 {
		return fmt.Errorf("%w: a topic name is 1-64 of [A-Za-z0-9_./-], got %q", ErrInvalid, t.Name)
	}
	if len(t.Description) > MaxTopicDescription {
		return fmt.Errorf("%w: a topic description is at most %d bytes", ErrInvalid, MaxTopicDescription)
	}
	switch t.Visibility {
	case "", VisibilityPublic, VisibilityPrivate, VisibilityDM:
		return nil
	}
	return fmt.Errorf("%w: visibility must be public, private or dm, not %q", ErrInvalid, t.Visibility)
}

// ValidTopicRole reports whether role is one a member may join with ("" is
// member).
func ValidTopicRole(role string) bool {
	return role == "" || role == RoleLead || role == RoleMember || role == RoleObserver
}

// newTopicID is 32 random characters of [0-9A-Za-z].
func newTopicID() string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	out := make([]byte, 0, TopicIDLength)
	var buf [64]byte
	for len(out) < TopicIDLength {
		_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails
		for _, b := range buf {
			if b < 248 && len(out) < TopicIDLength { // 248 = 4 × 62: no modulo bias
				out = append(out, alphabet[b%62])
			}
		}
	}
	return string(out)
}

// CreateTopic creates a topic of the mesh named t.Name, its creator joined
// as lead, and reports created. A name the mesh already has returns that
// topic (created false), and the caller joins it as a member if it was not
// one. Invalid fields wrap ErrInvalid.
func (s *Store) CreateTopic(ctx context.Context, meshID, creatorID string, t NewTopic) (*Topic, bool, error) {
	if err := t.validate(); err != nil {
		return nil, false, err
	}
	visibility := t.Visibility
	if visibility == "" {
		visibility = VisibilityPublic
	}
	created := false
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		now := s.d.time(s.clock())
		var ids []string
		if err := s.txSelect(ctx, tx, &ids, s.d.rewrite(`INSERT INTO topic (id, mesh_id, name, description, visibility,
			created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (mesh_id, name) DO NOTHING RETURNING id`),
			newTopicID(), meshID, t.Name, t.Description, visibility, creatorID, now); err != nil {
			return err
		}
		created = len(ids) == 1
		role := RoleMember
		if created {
			role = RoleLead
		}
		_, err := s.txExec(ctx, tx, s.d.rewrite(`INSERT INTO topic_member (topic_id, member_id, role, joined_at)
			SELECT id, ?, ?, ? FROM topic WHERE mesh_id = ? AND name = ?
			ON CONFLICT (topic_id, member_id) DO NOTHING`), creatorID, role, now, meshID, t.Name)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("create topic: %w", err)
	}
	topic, err := s.Topic(ctx, meshID, t.Name)
	return topic, created, err
}

const topicSelect = `SELECT t.id, t.mesh_id, t.name, t.description, t.visibility, t.created_by, t.created_at,
	       (SELECT COUNT(*) FROM topic_member tm JOIN member m ON m.id = tm.member_id
	         WHERE tm.topic_id = t.id AND m.revoked_at IS NULL)
	  FROM topic t`

func scanTopic(row interface{ Scan(...any) error }) (*Topic, error) {
	var t Topic
	err := row.Scan(&t.ID, &t.MeshID, &t.Name, &t.Description, &t.Visibility, &t.CreatedBy, (*dbTime)(&t.CreatedAt), &t.MemberCount)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// Topic returns the topic of the mesh whose id is ref, else whose name is
// ref, or ErrTopicNotFound.
func (s *Store) Topic(ctx context.Context, meshID, ref string) (*Topic, error) {
	t, err := scanTopic(s.rdb.QueryRowxContext(ctx, s.d.rewrite(topicSelect+
		` WHERE t.mesh_id = ? AND (t.id = ? OR t.name = ?) ORDER BY CASE WHEN t.id = ? THEN 0 ELSE 1 END LIMIT 1`),
		meshID, ref, ref, ref))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, ErrTopicNotFound
	case err != nil:
		return nil, fmt.Errorf("read topic: %w", err)
	}
	return t, nil
}

// Topics lists the topics of the mesh by name.
func (s *Store) Topics(ctx context.Context, meshID string) ([]Topic, error) {
	topics, err := queryAll(ctx, s, scanTopic, topicSelect+` WHERE t.mesh_id = ? ORDER BY t.name`, meshID)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	return topics, nil
}

// JoinTopic makes the member a member of the topic with role; joining
// again changes the role when one is given ("" keeps it, member for a new
// membership). An invalid role wraps ErrInvalid.
func (s *Store) JoinTopic(ctx context.Context, topicID, memberID, role string) error {
	if !ValidTopicRole(role) {
		return fmt.Errorf("%w: role must be lead, member or observer, not %q", ErrInvalid, role)
	}
	onConflict := "DO UPDATE SET role = excluded.role"
	if role == "" {
		role, onConflict = RoleMember, "DO NOTHING"
	}
	_, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO topic_member (topic_id, member_id, role, joined_at)
		VALUES (?, ?, ?, ?) ON CONFLICT (topic_id, member_id) `+onConflict), topicID, memberID, role, s.d.time(s.clock()))
	if err != nil {
		return fmt.Errorf("join topic: %w", err)
	}
	return nil
}

// LeaveTopic ends the member's membership of the topic (none: no-op).
func (s *Store) LeaveTopic(ctx context.Context, topicID, memberID string) error {
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`DELETE FROM topic_member WHERE topic_id = ? AND member_id = ?`),
		topicID, memberID); err != nil {
		return fmt.Errorf("leave topic: %w", err)
	}
	return nil
}

// MarkTopicRead sets the member's last_read_at to now (not a member: no-op).
func (s *Store) MarkTopicRead(ctx context.Context, topicID, memberID string) error {
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`UPDATE topic_member SET last_read_at = ? WHERE topic_id = ? AND member_id = ?`),
		s.d.time(s.clock()), topicID, memberID); err != nil {
		return fmt.Errorf("mark topic read: %w", err)
	}
	return nil
}

// TopicMembers lists the active members joined to the topic, by join time.
func (s *Store) TopicMembers(ctx context.Context, topicID string) ([]TopicMember, error) {
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite(`SELECT m.id, m.pubkey, m.display_name, tm.role, tm.joined_at, tm.last_read_at
		  FROM topic_member tm JOIN member m ON m.id = tm.member_id
		 WHERE tm.topic_id = ? AND m.revoked_at IS NULL ORDER BY tm.joined_at, m.id`), topicID)
	if err != nil {
		return nil, fmt.Errorf("list topic members: %w", err)
	}
	defer rows.Close()
	out := []TopicMember{}
	for rows.Next() {
		var m TopicMember
		if err := rows.Scan(&m.MemberID, &m.Pubkey, &m.DisplayName, &m.Role, (*dbTime)(&m.JoinedAt), nullTime{&m.LastReadAt}); err != nil {
			return nil, fmt.Errorf("list topic members: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list topic members: %w", err)
	}
	return out, nil
}

// TopicRecipients returns the member keys of the active members joined to
// the topic with this id in the mesh, or ErrTopicNotFound: who a send to
// `#<id>` reaches (their sessions too, which the hub adds).
func (s *Store) TopicRecipients(ctx context.Context, meshID, topicID string) ([]string, error) {
	var found []string
	if err := s.rdb.SelectContext(ctx, &found, s.d.rewrite(`SELECT id FROM topic WHERE mesh_id = ? AND id = ?`),
		meshID, topicID); err != nil {
		return nil, fmt.Errorf("read topic: %w", err)
	}
	if len(found) == 0 {
		return nil, ErrTopicNotFound
	}
	keys := []string{}
	if err := s.rdb.SelectContext(ctx, &keys, s.d.rewrite(`SELECT m.pubkey FROM topic_member tm JOIN member m ON m.id = tm.member_id
		 WHERE tm.topic_id = ? AND m.revoked_at IS NULL ORDER BY m.pubkey`), topicID); err != nil {
		return nil, fmt.Errorf("read topic members: %w", err)
	}
	return keys, nil
}

// TopicHistory returns up to limit messages sent to the topic, newest
// first, older than the message beforeID when it is not "" (paging). A
// limit out of 1..MaxTopicHistory is DefaultTopicHistory or the maximum.
func (s *Store) TopicHistory(ctx context.Context, meshID, topicID string, limit int, beforeID string) ([]TopicMessage, error) {
	switch {
	case limit <= 0:
		limit = DefaultTopicHistory
	case limit > MaxTopicHistory:
		limit = MaxTopicHistory
	}
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite(`SELECT m.id, m.sender_pubkey, COALESCE(mem.id, ''),
		       COALESCE(m.sender_name, mem.display_name, ''), m.nonce, m.ciphertext, COALESCE(m.reply_to_id, ''), m.created_at
		  FROM message m LEFT JOIN member mem ON mem.mesh_id = m.mesh_id AND mem.pubkey = m.sender_pubkey
		 WHERE m.mesh_id = ? AND m.target_spec = ? AND m.target_spec LIKE '#%' AND (? = '' OR m.id < ?)
		 ORDER BY m.id DESC LIMIT ?`), meshID, "#"+topicID, beforeID, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("read topic history: %w", err)
	}
	defer rows.Close()
	out := []TopicMessage{}
	for rows.Next() {
		var m TopicMessage
		if err := rows.Scan(&m.ID, &m.SenderPubkey, &m.SenderMemberID, &m.SenderName, &m.Nonce, &m.Ciphertext, &m.ReplyToID,
			(*dbTime)(&m.CreatedAt)); err != nil {
			return nil, fmt.Errorf("read topic history: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read topic history: %w", err)
	}
	return out, nil
}
