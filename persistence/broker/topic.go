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

// TopicParty is who joins, leads, leaves or marks a topic read: a member
// itself (SessionPubkey "": a member connection, or an upstream hello,
// whose topics are its member's as upstream's are) or one of its agent
// sessions (a session_hello connection), which joins for itself alone.
type TopicParty struct {
	MemberID      string
	SessionPubkey string // "" for the member itself
	SessionName   string // the session's display name ("": its member's)
}

// TopicMember is one member or session joined to a topic: a session by
// its own key and name.
type TopicMember struct {
	MemberID    string
	Pubkey      string // the session's key for a session, else the member's
	DisplayName string // the session's name for a session, else the member's
	Role        string
	JoinedAt    time.Time
	LastReadAt  *time.Time // nil until topic_mark_read
}

// TopicAudience is who a send to a topic reaches: the keys of the members
// joined as themselves, and the keys of the sessions joined, which the
// broker's hub keeps to those connected.
type TopicAudience struct {
	Members  []string
	Sessions []string
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
// as lead (a session as itself), and reports created. A name the mesh
// already has returns that topic (created false), and the creator joins it
// as a member if it was not one. Invalid fields wrap ErrInvalid.
func (s *Store) CreateTopic(ctx context.Context, meshID string, creator TopicParty, t NewTopic) (*Topic, bool, error) {
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
			newTopicID(), meshID, t.Name, t.Description, visibility, creator.MemberID, now); err != nil {
			return err
		}
		created = len(ids) == 1
		role := RoleMember
		if created {
			role = RoleLead
		}
		_, err := s.txExec(ctx, tx, s.d.rewrite(`INSERT INTO topic_member (topic_id, member_id, session_pubkey, session_name,
			role, joined_at) SELECT id, ?, ?, ?, ?, ? FROM topic WHERE mesh_id = ? AND name = ?
			ON CONFLICT (topic_id, member_id, session_pubkey) DO NOTHING`),
			creator.MemberID, creator.SessionPubkey, creator.SessionName, role, now, meshID, t.Name)
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

// JoinTopic makes p a member of the topic with role; joining again changes
// the role when one is given ("" keeps it, member for a new membership)
// and a session's name. An invalid role wraps ErrInvalid.
func (s *Store) JoinTopic(ctx context.Context, topicID string, p TopicParty, role string) error {
	if !ValidTopicRole(role) {
		return fmt.Errorf("%w: role must be lead, member or observer, not %q", ErrInvalid, role)
	}
	onConflict := "DO UPDATE SET role = excluded.role, session_name = excluded.session_name"
	if role == "" {
		role, onConflict = RoleMember, "DO UPDATE SET session_name = excluded.session_name"
	}
	_, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO topic_member (topic_id, member_id, session_pubkey, session_name,
		role, joined_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (topic_id, member_id, session_pubkey) `+onConflict),
		topicID, p.MemberID, p.SessionPubkey, p.SessionName, role, s.d.time(s.clock()))
	if err != nil {
		return fmt.Errorf("join topic: %w", err)
	}
	return nil
}

// LeaveTopic ends p's membership of the topic (none: no-op); a member's
// sessions, or the member and its other sessions, keep theirs.
func (s *Store) LeaveTopic(ctx context.Context, topicID string, p TopicParty) error {
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`DELETE FROM topic_member
		 WHERE topic_id = ? AND member_id = ? AND session_pubkey = ?`), topicID, p.MemberID, p.SessionPubkey); err != nil {
		return fmt.Errorf("leave topic: %w", err)
	}
	return nil
}

// MarkTopicRead sets p's last_read_at to now (not joined: no-op).
func (s *Store) MarkTopicRead(ctx context.Context, topicID string, p TopicParty) error {
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`UPDATE topic_member SET last_read_at = ?
		 WHERE topic_id = ? AND member_id = ? AND session_pubkey = ?`),
		s.d.time(s.clock()), topicID, p.MemberID, p.SessionPubkey); err != nil {
		return fmt.Errorf("mark topic read: %w", err)
	}
	return nil
}

// TopicMembers lists the members and sessions of active members joined to
// the topic, by join time.
func (s *Store) TopicMembers(ctx context.Context, topicID string) ([]TopicMember, error) {
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite(`SELECT m.id, COALESCE(NULLIF(tm.session_pubkey, ''), m.pubkey),
		       COALESCE(NULLIF(tm.session_name, ''), m.display_name), tm.role, tm.joined_at, tm.last_read_at
		  FROM topic_member tm JOIN member m ON m.id = tm.member_id
		 WHERE tm.topic_id = ? AND m.revoked_at IS NULL ORDER BY tm.joined_at, m.id, tm.session_pubkey`), topicID)
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

// TopicRecipients returns who a send to `#<id>` reaches, the topic with
// this id in the mesh (else ErrTopicNotFound): the keys of the active
// members joined as themselves and of the joined sessions of active
// members, each sorted.
func (s *Store) TopicRecipients(ctx context.Context, meshID, topicID string) (*TopicAudience, error) {
	var found []string
	if err := s.rdb.SelectContext(ctx, &found, s.d.rewrite(`SELECT id FROM topic WHERE mesh_id = ? AND id = ?`),
		meshID, topicID); err != nil {
		return nil, fmt.Errorf("read topic: %w", err)
	}
	if len(found) == 0 {
		return nil, ErrTopicNotFound
	}
	var joined []struct {
		Session string `db:"session_pubkey"`
		Member  string `db:"pubkey"`
	}
	if err := s.rdb.SelectContext(ctx, &joined, s.d.rewrite(`SELECT tm.session_pubkey, m.pubkey
		  FROM topic_member tm JOIN member m ON m.id = tm.member_id
		 WHERE tm.topic_id = ? AND m.revoked_at IS NULL ORDER BY tm.session_pubkey, m.pubkey`), topicID); err != nil {
		return nil, fmt.Errorf("read topic members: %w", err)
	}
	out := &TopicAudience{Members: []string{}, Sessions: []string{}}
	for _, j := range joined {
		if j.Session == "" {
			out.Members = append(out.Members, j.Member)
		} else {
			out.Sessions = append(out.Sessions, j.Session)
		}
	}
	return out, nil
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
