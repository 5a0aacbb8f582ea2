package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Agent sessions across replicas (migration 0016, mesh_session). A hub
// knows the session_hello connections of its own replica only; the
// connection that holds a session writes its row — at its hello, at each
// heartbeat, at its close — so that another replica can accept a DM to its
// key (the accept's B2 check reads the table for a recipient that is
// neither an active member nor a session the hub knows) and list it among
// the peers. A row counts until its expires_at, which the connection keeps
// a stale threshold ahead while it lives, and sets a presence grace ahead
// when it closes; a session of a revoked member never counts.

// MaxSessionText bounds each text a session's hello says about it (name,
// session id, host, directory, …) in its row: longer values are cut, not
// refused (what is listed, not what is trusted).
const MaxSessionText = 1024

// SessionConn is a session_hello connection: the session key, the member
// whose attestation it holds, what its hello said, and the connection (the
// broker replica and its id there) that holds the session's row.
type SessionConn struct {
	MeshID        string
	SessionPubkey string
	MemberPubkey  string
	Replica       string
	ConnID        string
	DisplayName   string // the session's own name; "" shows its member's
	SessionID     string
	Hostname      string
	Cwd           string
	PeerType      string
	Channel       string
	Groups        []messages.Group
	// Legacy marks the session of a legacy hello (a hello naming a
	// sessionPubkey), whose connection also receives for its member key.
	Legacy bool
}

// Session is a session connected to some replica, as Sessions lists it.
type Session struct {
	SessionConn
	ConnectedAt time.Time
}

// ConnectSession records a session connection that passed its hello:
// connected now, counting for stale more, held by this connection (a
// session that reconnects, here or at another replica, takes its row
// over from its old connection). When another connection held the row
// live, the takeover is NOTIFYd with the commit (PostgreSQL: the broker
// holding that connection closes it, ListenSessions), so that a session
// whose old connection lingers at another replica — a daemon that
// reconnected elsewhere before the old one's close was seen — is not
// listed there as a second, ghost peer until that connection times out.
func (s *Store) ConnectSession(ctx context.Context, c SessionConn, stale time.Duration) error {
	groups, err := json.Marshal(nonNilGroups(c.Groups))
	if err != nil {
		return fmt.Errorf("connect session: %w", err)
	}
	now := s.clock()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		var held []SessionTaken
		if err := s.txSelect(ctx, tx, &held, s.d.rewrite(`SELECT mesh_id, session_pubkey, replica, conn_id FROM mesh_session
			WHERE mesh_id = ? AND session_pubkey = ? AND disconnected_at IS NULL /*FOR UPDATE*/`),
			c.MeshID, c.SessionPubkey); err != nil {
			return err
		}
		if _, err := s.txExec(ctx, tx, s.d.rewrite(`INSERT INTO mesh_session (mesh_id, session_pubkey, member_pubkey,
			replica, conn_id, display_name, session_id, hostname, cwd, peer_type, channel, groups, connected_at, expires_at,
			disconnected_at, legacy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)
			ON CONFLICT (mesh_id, session_pubkey) DO UPDATE SET member_pubkey = excluded.member_pubkey,
			replica = excluded.replica, conn_id = excluded.conn_id, display_name = excluded.display_name,
			session_id = excluded.session_id, hostname = excluded.hostname, cwd = excluded.cwd,
			peer_type = excluded.peer_type, channel = excluded.channel, groups = excluded.groups,
			connected_at = excluded.connected_at, expires_at = excluded.expires_at, disconnected_at = NULL,
			legacy = excluded.legacy`),
			c.MeshID, c.SessionPubkey, c.MemberPubkey, c.Replica, c.ConnID, cut(c.DisplayName, MaxSessionText),
			cut(c.SessionID, MaxSessionText), cut(c.Hostname, MaxSessionText), cut(c.Cwd, MaxSessionText),
			cut(c.PeerType, MaxSessionText), cut(c.Channel, MaxSessionText), string(groups), s.d.time(now),
			s.d.time(now.Add(stale)), c.Legacy); err != nil {
			return err
		}
		if len(held) == 1 && (held[0].Replica != c.Replica || held[0].ConnID != c.ConnID) {
			return s.notifySessionTaken(ctx, tx, &held[0])
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("connect session: %w", err)
	}
	return nil
}

// SessionHold is what a heartbeat found of its connection's session row.
type SessionHold int

const (
	// SessionHeld: the connection holds the row, now seen.
	SessionHeld SessionHold = iota
	// SessionTakenOver: another connection holds the row and counts — a
	// takeover whose notification this replica missed, or two hellos that
	// raced, the other written last. The connection should close.
	SessionTakenOver
	// SessionLost: no connection's row counts — swept after heartbeats that
	// could not be written, or closed by the connection that took it over.
	// The connection should write its row again (ConnectSession).
	SessionLost
)

// SeeSession records a heartbeat of the connection: the session counts
// for stale more. A connection that no longer holds the row, or whose
// close was recorded, changes nothing, and is told which of the two
// (SessionTakenOver, SessionLost).
func (s *Store) SeeSession(ctx context.Context, c SessionConn, stale time.Duration) (SessionHold, error) {
	now := s.clock()
	res, err := s.db.ExecContext(ctx, s.d.rewrite(`UPDATE mesh_session SET expires_at = ?
		WHERE mesh_id = ? AND session_pubkey = ? AND replica = ? AND conn_id = ? AND disconnected_at IS NULL`),
		s.d.time(now.Add(stale)), c.MeshID, c.SessionPubkey, c.Replica, c.ConnID)
	if err != nil {
		return SessionHeld, fmt.Errorf("see session: %w", err) // the caller does nothing; the next heartbeat may pass
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return SessionHeld, err
	}
	var live int
	if err := s.db.QueryRowContext(ctx, s.d.rewrite(`SELECT COUNT(*) FROM mesh_session
		WHERE mesh_id = ? AND session_pubkey = ? AND disconnected_at IS NULL AND expires_at > ?`),
		c.MeshID, c.SessionPubkey, s.d.time(now)).Scan(&live); err != nil {
		return SessionHeld, fmt.Errorf("see session: who holds it: %w", err)
	}
	if live > 0 {
		return SessionTakenOver, nil
	}
	return SessionLost, nil
}

// DisconnectSession records that the connection closed: the session is
// no longer listed, and counts as a recipient for grace more (a DM to it
// then queues for its reconnect). A connection that no longer holds the
// row changes nothing.
func (s *Store) DisconnectSession(ctx context.Context, c SessionConn, grace time.Duration) error {
	now := s.clock()
	_, err := s.db.ExecContext(ctx, s.d.rewrite(`UPDATE mesh_session SET disconnected_at = ?, expires_at = ?
		WHERE mesh_id = ? AND session_pubkey = ? AND replica = ? AND conn_id = ? AND disconnected_at IS NULL`),
		s.d.time(now), s.d.time(now.Add(grace)), c.MeshID, c.SessionPubkey, c.Replica, c.ConnID)
	if err != nil {
		return fmt.Errorf("disconnect session: %w", err)
	}
	return nil
}

// Sessions lists the mesh's connected sessions of active members, every
// replica's, oldest connection first: those whose close was not recorded
// and that still count.
func (s *Store) Sessions(ctx context.Context, meshID string) ([]Session, error) {
	rows, err := s.rdb.QueryxContext(ctx, s.d.rewrite(`SELECT s.mesh_id, s.session_pubkey, s.member_pubkey,
		s.replica, s.conn_id, s.display_name, s.session_id, s.hostname, s.cwd, s.peer_type, s.channel, s.groups, s.connected_at,
		s.legacy FROM mesh_session s JOIN member m ON m.mesh_id = s.mesh_id AND m.pubkey = s.member_pubkey
		WHERE s.mesh_id = ? AND s.disconnected_at IS NULL AND s.expires_at > ? AND m.revoked_at IS NULL
		ORDER BY s.connected_at, s.session_pubkey`), meshID, s.d.time(s.clock()))
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	out := []Session{}
	for rows.Next() {
		var ss Session
		var groups string
		c := &ss.SessionConn
		if err := rows.Scan(&c.MeshID, &c.SessionPubkey, &c.MemberPubkey, &c.Replica, &c.ConnID, &c.DisplayName,
			&c.SessionID, &c.Hostname, &c.Cwd, &c.PeerType, &c.Channel, &groups, (*dbTime)(&ss.ConnectedAt), &c.Legacy); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		if err := json.Unmarshal([]byte(groups), &c.Groups); err != nil {
			return nil, fmt.Errorf("list sessions: the groups of %.16s: %w", c.SessionPubkey, err)
		}
		out = append(out, ss)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// SweepSessions deletes the rows that stopped counting by now and
// returns how many.
func (s *Store) SweepSessions(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.d.rewrite("DELETE FROM mesh_session WHERE expires_at <= ?"), s.d.time(now))
	if err != nil {
		return 0, fmt.Errorf("sweep sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sweep sessions: %w", err)
	}
	return n, nil
}

// countingSessions adds to active, in tx, the keys among the DM
// recipients in keys that are sessions that count now, each of an active
// member of its mesh (the store's answer for a session key no hub of the
// accepting broker knows: one connected to another replica).
func (s *Store) countingSessions(ctx context.Context, tx *sqlx.Tx, keys []memberKey, now time.Time, active map[memberKey]bool) error {
	meshes, pubkeys := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		meshes[i], pubkeys[i] = k.meshID, k.pubkey
	}
	var rows []struct {
		MeshID string `db:"mesh_id"`
		Pubkey string `db:"session_pubkey"`
	}
	if err := s.txSelect(ctx, tx, &rows, s.d.rewrite(`SELECT s.mesh_id, s.session_pubkey FROM mesh_session s
		JOIN member m ON m.mesh_id = s.mesh_id AND m.pubkey = s.member_pubkey
		WHERE s.mesh_id IN (SELECT value FROM EACH(?)) AND s.session_pubkey IN (SELECT value FROM EACH(?))
		  AND s.expires_at > ? AND m.revoked_at IS NULL`), jsonArray(meshes), jsonArray(pubkeys), s.d.time(now)); err != nil {
		return err
	}
	for _, r := range rows {
		active[memberKey{r.MeshID, r.Pubkey}] = true
	}
	return nil
}

func nonNilGroups(g []messages.Group) []messages.Group {
	if g == nil {
		return []messages.Group{}
	}
	return g
}
