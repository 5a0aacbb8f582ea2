package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// ErrNameTaken means a display name reads the same as one an active member
// of the mesh already holds (messages.NameKey). A *NameTakenError matches
// it and ErrInvalid.
var ErrNameTaken = errors.New("display name taken")

// NameTakenError is a display name refused because Holder, an active
// member's name, has the same key.
type NameTakenError struct {
	Name   string
	Holder string // "" when another join took it at the same moment
}

func (e *NameTakenError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("display name %q is taken in this mesh; choose another", e.Name)
	}
	if e.Holder == e.Name {
		return fmt.Sprintf("display name %q is taken in this mesh by another member; choose another", e.Name)
	}
	return fmt.Sprintf("display name %q is taken in this mesh: it reads the same as member %q once case, width and "+
		"look-alike letters are set aside; choose another", e.Name, e.Holder)
}

// Is makes a NameTakenError match ErrNameTaken and ErrInvalid.
func (e *NameTakenError) Is(target error) bool { return target == ErrNameTaken || target == ErrInvalid }

// nameKeyOf is the stored key of a display name, or an ErrInvalid error for
// a name with nothing visible in it.
func nameKeyOf(displayName string) (string, error) {
	key := messages.NameKey(displayName)
	if key == "" {
		return "", fmt.Errorf("%w: display name %q has no visible characters", ErrInvalid, displayName)
	}
	return key, nil
}

// nameHolder returns the display name of an active member of the mesh,
// other than exceptPubkey, whose name has key, or of one whose session's
// name it is (session_name); "" when there is none. It computes the
// members' keys rather than reading the column, so that look-alikes
// admitted before the names were unique (whose column is NULL) count too.
func nameHolder(ctx context.Context, q sqlx.QueryerContext, d *dialect, meshID, key, exceptPubkey string) (string, error) {
	var sessionOf []string
	if err := sqlx.SelectContext(ctx, q, &sessionOf, d.rewrite(`SELECT s.name FROM session_name s JOIN member m ON m.id = s.member_id
		WHERE s.mesh_id = ? AND s.name_key = ? AND m.pubkey <> ? AND m.revoked_at IS NULL`), meshID, key, exceptPubkey); err != nil {
		return "", fmt.Errorf("read session names: %w", err)
	}
	if len(sessionOf) > 0 {
		return sessionOf[0], nil
	}
	rows, err := q.QueryxContext(ctx, d.rewrite(`SELECT pubkey, display_name FROM member
		WHERE mesh_id = ? AND revoked_at IS NULL`), meshID)
	if err != nil {
		return "", fmt.Errorf("read member names: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pubkey, name string
		if err := rows.Scan(&pubkey, &name); err != nil {
			return "", fmt.Errorf("read member names: %w", err)
		}
		if pubkey != exceptPubkey && messages.NameKey(name) == key {
			return name, nil
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read member names: %w", err)
	}
	return "", nil
}

// ClaimSessionName gives a session of member the display name name, unless
// another active member holds it — as its own name, or as the name its
// session took first — and returns that holder's name ("" when granted).
// The first session to use a name keeps it for its member.
func (s *Store) ClaimSessionName(ctx context.Context, meshID, name string, member *Member) (string, error) {
	key := messages.NameKey(name)
	if key == "" {
		return "", nil
	}
	var holder string
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		if holder, err = nameHolder(ctx, tx, s.d, meshID, key, member.Pubkey); err != nil || holder != "" {
			return err
		}
		// A name whose holder was revoked passes to this member.
		_, err = tx.ExecContext(ctx, s.d.rewrite(`INSERT INTO session_name (mesh_id, name_key, member_id, name) VALUES (?, ?, ?, ?)
			ON CONFLICT (mesh_id, name_key) DO UPDATE SET member_id = excluded.member_id, name = excluded.name`),
			meshID, key, member.ID, name)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("claim a session name: %w", err)
	}
	return holder, nil
}

// isNameKeyConflict reports a unique violation of member_name_key_idx: a
// concurrent join took the name between the check and the insert.
func isNameKeyConflict(err error) bool {
	return err != nil && strings.Contains(err.Error(), "name_key")
}

// fillNameKeys gives every active member without a name key the key of its
// display name, oldest first, unless another active member of its mesh
// holds it: rows from before migration 0004, and a look-alike whose holder
// was revoked since. A row left without its key is a look-alike kept from
// before; `broker member list` reports it. Another replica filling at the
// same moment only makes an update fail, which is skipped.
func (s *Store) fillNameKeys(ctx context.Context) error {
	type row struct {
		ID          string `db:"id"`
		MeshID      string `db:"mesh_id"`
		DisplayName string `db:"display_name"`
	}
	var rows []row
	if err := sqlx.SelectContext(ctx, s.db, &rows, `SELECT id, mesh_id, display_name FROM member
		WHERE name_key IS NULL AND revoked_at IS NULL ORDER BY created_at, id`); err != nil {
		return fmt.Errorf("read members without a name key: %w", err)
	}
	kept := 0
	for _, r := range rows {
		key := messages.NameKey(r.DisplayName)
		if key == "" {
			kept++
			continue
		}
		res, err := s.db.ExecContext(ctx, s.d.rewrite(`UPDATE member SET name_key = ?
			WHERE id = ? AND name_key IS NULL AND NOT EXISTS (
				SELECT 1 FROM member o WHERE o.mesh_id = ? AND o.name_key = ? AND o.revoked_at IS NULL)`),
			key, r.ID, r.MeshID, key)
		if isNameKeyConflict(err) {
			kept++
			continue
		}
		if err != nil {
			return fmt.Errorf("fill the name key of member %s: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			kept++
		}
	}
	if kept > 0 {
		s.log.Warn("member_name_lookalikes_kept", "members", kept,
			"detail", "members whose display names read the same as another's, admitted before names were unique; see `claudemesh broker member list`")
	}
	return nil
}
