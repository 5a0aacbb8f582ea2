package broker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/pathglob"
)

// File reservations (migration 0015). A grant is decided in one
// transaction per (mesh, repository): it first takes the repository's
// reservation_scope row (an upsert, whose row lock on PostgreSQL makes a
// replica's grant wait for another's commit; SQLite has one writer), then
// reads the active reservations of the other holders, decides overlap
// with pathglob.Overlap (exact), and inserts the grant under the next
// fence token — or rolls back, leaving nothing written, and returns the
// conflicts. Two grants that conflict can therefore never both commit.

// Reservation errors; each wraps ErrInvalid, or is ErrReservationNotHeld.
var (
	ErrInvalidReservationRepo = fmt.Errorf("%w: a reservation's repository id is 1-%d bytes of UTF-8 with no control characters",
		ErrInvalid, messages.MaxLockRepo)
	ErrInvalidPattern        = fmt.Errorf("%w: invalid path pattern", ErrInvalid)
	ErrInvalidPath           = fmt.Errorf("%w: invalid path", ErrInvalid)
	ErrTooManyPatterns       = fmt.Errorf("%w: a reservation has 1-%d patterns", ErrInvalid, messages.MaxReservePatterns)
	ErrTooManyPaths          = fmt.Errorf("%w: a check names 1-%d paths", ErrInvalid, messages.MaxCheckPaths)
	ErrInvalidReservationTTL = fmt.Errorf("%w: a reservation's TTL is %v to %v", ErrInvalid, messages.MinReservationTTL, messages.MaxReservationTTL)
	// ErrTooManyReservations is a grant that would leave its member
	// holding more than messages.MaxReservationsPerMember in the repository.
	ErrTooManyReservations = fmt.Errorf("%w: a member holds at most %d reservations in one repository", ErrInvalid,
		messages.MaxReservationsPerMember)
	// ErrReservationNotHeld is a renewal of a grant none of whose
	// reservations stands: expired, released, or forced released (the
	// error then says by whom).
	ErrReservationNotHeld = errors.New("reservation not held")
)

// Reservation is one pattern of a grant.
type Reservation struct {
	Repo       string
	Pattern    string
	Exclusive  bool
	Fence      int64
	Holder     string
	HolderName string
	AcquiredAt time.Time
	RenewedAt  time.Time
	ExpiresAt  time.Time
}

// ReservationConflict is a reservation in the way of a request.
type ReservationConflict struct {
	Reservation
	Yours string // the requested pattern
	Path  string // a path both cover
	Stale bool   // its holder has been gone longer than the threshold
}

// PathConflict is a path another holder reserves exclusively.
type PathConflict struct {
	Path string
	Reservation
}

// Reserve is a request for a grant.
type Reserve struct {
	Repo      string
	Patterns  []string
	Exclusive bool
	TTL       time.Duration
	// Force releases first the conflicting reservations whose holder has
	// not renewed for StaleAfter: all of that holder's in the repository.
	Force      bool
	StaleAfter time.Duration
}

// Grant is the outcome of Reserve: Granted with the caller's reservations
// under Fence, or the conflicts (nothing written). Forced are the
// reservations a force released.
type Grant struct {
	Granted      bool
	Fence        int64
	Reservations []Reservation
	Conflicts    []ReservationConflict
	Forced       []Reservation
}

// errRefused rolls a refused grant back.
var errRefused = errors.New("refused")

func checkReserve(r *Reserve) ([]*pathglob.Pattern, error) {
	if r.Repo == "" || messages.CheckLockRepo(r.Repo) != nil {
		return nil, ErrInvalidReservationRepo
	}
	if r.TTL < messages.MinReservationTTL || r.TTL > messages.MaxReservationTTL {
		return nil, ErrInvalidReservationTTL
	}
	return parsePatterns(r.Patterns, true)
}

func parsePatterns(texts []string, required bool) ([]*pathglob.Pattern, error) {
	if len(texts) > messages.MaxReservePatterns || (required && len(texts) == 0) {
		return nil, ErrTooManyPatterns
	}
	out := make([]*pathglob.Pattern, 0, len(texts))
	for _, t := range texts {
		p, err := pathglob.Parse(t)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidPattern, err)
		}
		if !slices.ContainsFunc(out, func(q *pathglob.Pattern) bool { return q.Text == t }) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Reserve grants r to who, or returns what is in the way. A revoked
// member is ErrMemberRevoked. On PostgreSQL the reservations a force
// released are announced with the commit (origin: this broker).
func (s *Store) Reserve(ctx context.Context, meshID, origin string, r Reserve, who LockHolder) (*Grant, error) {
	want, err := checkReserve(&r)
	if err != nil {
		return nil, err
	}
	now := s.clock()
	g := &Grant{}
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		fence, err := s.takeScope(ctx, tx, meshID, r.Repo, who)
		if err != nil {
			return err
		}
		if err := s.checkHolding(ctx, tx, meshID, r.Repo, want, now, who); err != nil {
			return err
		}
		others, err := s.activeReservations(ctx, tx, meshID, r.Repo, who.Pubkey, want, now)
		if err != nil {
			return err
		}
		g.Conflicts = conflicts(want, others, r.Exclusive, now.Add(-r.StaleAfter))
		if len(g.Conflicts) > 0 && r.Force {
			if err := s.forceStale(ctx, tx, meshID, origin, r.Repo, g, now, who); err != nil {
				return err
			}
		}
		if len(g.Conflicts) > 0 {
			return errRefused
		}
		g.Granted, g.Fence = true, fence+1
		return s.insertGrant(ctx, tx, meshID, r, want, g, now, who)
	})
	switch {
	case errors.Is(err, errRefused):
		g.Forced = nil // rolled back with the refusal
		return g, nil
	case err != nil:
		return nil, fmt.Errorf("reserve: %w", err)
	}
	return g, nil
}

// takeScope takes the repository's scope row (its row lock on
// PostgreSQL) and returns its fence; ErrMemberRevoked for a member not
// active.
func (s *Store) takeScope(ctx context.Context, tx *sqlx.Tx, meshID, repo string, who LockHolder) (int64, error) {
	var fence int64
	err := tx.GetContext(ctx, &fence, s.d.rewrite(`INSERT INTO reservation_scope (mesh_id, repo, fence) SELECT ?, ?, 0 WHERE `+activeMember+`
		ON CONFLICT (mesh_id, repo) DO UPDATE SET fence = reservation_scope.fence RETURNING fence`), meshID, repo, who.MemberID, meshID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrMemberRevoked
	}
	return fence, err
}

const reservationSelect = `SELECT repo, pattern, exclusive, fence, holder, holder_name, acquired_at, renewed_at, expires_at FROM reservation`

func scanReservation(row interface{ Scan(...any) error }) (*Reservation, error) {
	var r Reservation
	if err := row.Scan(&r.Repo, &r.Pattern, &r.Exclusive, &r.Fence, &r.Holder, &r.HolderName, (*dbTime)(&r.AcquiredAt),
		(*dbTime)(&r.RenewedAt), (*dbTime)(&r.ExpiresAt)); err != nil {
		return nil, err
	}
	return &r, nil
}

// checkHolding refuses a grant of want that would leave who's member
// holding more than MaxReservationsPerMember in repo (a pattern the holder
// reserves again is counted once).
func (s *Store) checkHolding(ctx context.Context, tx *sqlx.Tx, meshID, repo string, want []*pathglob.Pattern, now time.Time,
	who LockHolder) error {
	texts := make([]string, len(want))
	for i, p := range want {
		texts[i] = p.Text
	}
	var held int
	if err := tx.GetContext(ctx, &held, s.d.rewrite(`SELECT count(*) FROM reservation /*INDEXED BY reservation_member*/
		WHERE mesh_id = ? AND repo = ? AND member_id = ?
		AND released_by IS NULL AND expires_at > ? AND NOT (holder = ? AND pattern IN (SELECT value FROM EACH(?)))`),
		meshID, repo, who.MemberID, s.d.time(now), who.Pubkey, jsonArray(texts)); err != nil {
		return err
	}
	if held+len(want) > messages.MaxReservationsPerMember {
		return fmt.Errorf("%w: %s holds %d, and this grant would add %d: release some first", ErrTooManyReservations, who.Name, held,
			len(want))
	}
	return nil
}

// activeReservations reads the repository's standing reservations of
// holders other than except that can overlap one of want: those whose
// prefix meets a wanted one's (pathglob.PrefixesMeet), found through
// reservation_prefix.
func (s *Store) activeReservations(ctx context.Context, tx *sqlx.Tx, meshID, repo, except string, want []*pathglob.Pattern,
	now time.Time) ([]Reservation, error) {
	const standing = ` AND holder <> ? AND released_by IS NULL AND expires_at > ?`
	var query string
	var args []any
	near := prefixesNear(want)
	if near == nil { // a pattern that may cover a path anywhere: every reservation
		query, args = reservationSelect+` WHERE mesh_id = ? AND repo = ?`+standing, []any{meshID, repo, except, s.d.time(now)}
	}
	for i, c := range near {
		if i > 0 {
			query += " UNION "
		}
		query += reservationSelect + ` /*INDEXED BY reservation_prefix*/ WHERE mesh_id = ? AND repo = ? AND ` + c.cond + standing
		args = append(append(append(args, meshID, repo), c.args...), except, s.d.time(now))
	}
	return s.reservationsIn(ctx, tx, query+` ORDER BY pattern, holder`, args...)
}

// reservationsIn runs a query of reservations in tx.
func (s *Store) reservationsIn(ctx context.Context, tx *sqlx.Tx, query string, args ...any) ([]Reservation, error) {
	rows, err := tx.QueryxContext(ctx, s.d.rewrite(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Reservation
	for rows.Next() {
		r, err := scanReservation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, rows.Err()
}

// prefixCond is one condition on reservation_prefix and its arguments.
type prefixCond struct {
	cond string
	args []any
}

// prefixesNear are the conditions that together keep the reservations
// whose prefix meets one of want's: a prefix that is a wanted one or a
// directory of it ("" included), or one within a wanted prefix ('/' sorts
// just before '0'). nil: a wanted pattern with no prefix meets every
// reservation.
func prefixesNear(want []*pathglob.Pattern) []prefixCond {
	prefixes := make([]string, len(want))
	near := make([]prefixCond, 0, len(want)+1)
	for i, p := range want {
		if prefixes[i] = p.Prefix(); prefixes[i] == "" {
			return nil
		}
		near = append(near, prefixCond{cond: `prefix > ? AND prefix < ?`, args: []any{prefixes[i] + "/", prefixes[i] + "0"}})
	}
	ancestors := dirsOf(prefixes)
	return append(near, prefixCond{cond: `prefix IN (?` + strings.Repeat(`, ?`, len(ancestors)-1) + `)`, args: ancestors})
}

// dirsOf is "", each of paths, and each directory they lie in, once each,
// as query arguments.
func dirsOf(paths []string) []any {
	dirs := []string{""}
	for _, path := range paths {
		for i := range len(path) {
			if path[i] == '/' {
				dirs = append(dirs, path[:i])
			}
		}
		dirs = append(dirs, path)
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	out := make([]any, len(dirs))
	for i, d := range dirs {
		out[i] = d
	}
	return out
}

// conflicts lists the reservations of others in the way of want: an
// exclusive request is in the way of any overlapping reservation, a
// shared one of the exclusive ones. A holder not renewed since staleBefore
// is stale.
func conflicts(want []*pathglob.Pattern, others []Reservation, exclusive bool, staleBefore time.Time) []ReservationConflict {
	var out []ReservationConflict
	for _, o := range others {
		if !exclusive && !o.Exclusive {
			continue
		}
		theirs, err := pathglob.Parse(o.Pattern)
		if err != nil { // stored by an older rule: in the way, to be safe
			out = append(out, ReservationConflict{Reservation: o, Yours: want[0].Text, Stale: !o.RenewedAt.After(staleBefore)})
			continue
		}
		for _, p := range want {
			if path, ok := pathglob.Overlap(p, theirs); ok {
				out = append(out, ReservationConflict{Reservation: o, Yours: p.Text, Path: path, Stale: !o.RenewedAt.After(staleBefore)})
			}
		}
	}
	return out
}

// forceStale releases every reservation in the repository of each stale
// holder in the way (released_by: who), and leaves in g.Conflicts those
// of holders that are not stale.
func (s *Store) forceStale(ctx context.Context, tx *sqlx.Tx, meshID, origin, repo string, g *Grant, now time.Time,
	who LockHolder) error {
	var stale []string
	kept := g.Conflicts[:0]
	for _, c := range g.Conflicts {
		if c.Stale {
			if !slices.Contains(stale, c.Holder) {
				stale = append(stale, c.Holder)
			}
		} else {
			kept = append(kept, c)
		}
	}
	g.Conflicts = kept
	for _, holder := range stale {
		// All of the holder's reservations in the repository go, not only
		// those near the request that the conflicts came from.
		all, err := s.reservationsIn(ctx, tx, reservationSelect+` WHERE mesh_id = ? AND repo = ? AND holder = ?
			AND released_by IS NULL AND expires_at > ? ORDER BY pattern`, meshID, repo, holder, s.d.time(now))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.d.rewrite(`UPDATE reservation SET released_by = ?, expires_at = ?
			WHERE mesh_id = ? AND repo = ? AND holder = ? AND released_by IS NULL AND expires_at > ?`),
			who.Name, s.d.time(now), meshID, repo, holder, s.d.time(now)); err != nil {
			return err
		}
		var patterns []string
		for _, o := range all {
			g.Forced, patterns = append(g.Forced, o), append(patterns, o.Pattern)
		}
		if err := s.notifyReservationsReleased(ctx, tx, &ReservationsReleased{MeshID: meshID, Origin: origin, Repo: repo,
			Patterns: patterns, Holder: holder, ForcedBy: who.Name}); err != nil {
			return err
		}
	}
	return nil
}

// insertGrant writes the grant: the scope's new fence, and a row per
// pattern (a pattern the holder held already moves to this grant).
func (s *Store) insertGrant(ctx context.Context, tx *sqlx.Tx, meshID string, r Reserve, want []*pathglob.Pattern, g *Grant, now time.Time,
	who LockHolder) error {
	if _, err := tx.ExecContext(ctx, s.d.rewrite(`UPDATE reservation_scope SET fence = ? WHERE mesh_id = ? AND repo = ?`),
		g.Fence, meshID, r.Repo); err != nil {
		return err
	}
	t, exp := s.d.time(now), s.d.time(now.Add(r.TTL))
	for _, p := range want {
		if _, err := tx.ExecContext(ctx, s.d.rewrite(`INSERT INTO reservation (mesh_id, repo, holder, pattern, exclusive, fence, holder_name,
				member_id, acquired_at, renewed_at, expires_at, prefix) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (mesh_id, repo, holder, pattern) DO UPDATE SET exclusive = excluded.exclusive, fence = excluded.fence,
				holder_name = excluded.holder_name, member_id = excluded.member_id, acquired_at = excluded.acquired_at,
				renewed_at = excluded.renewed_at, expires_at = excluded.expires_at, released_by = NULL, prefix = excluded.prefix`),
			meshID, r.Repo, who.Pubkey, p.Text, r.Exclusive, g.Fence, who.Name, who.MemberID, t, t, exp, p.Prefix()); err != nil {
			return err
		}
		g.Reservations = append(g.Reservations, Reservation{Repo: r.Repo, Pattern: p.Text, Exclusive: r.Exclusive, Fence: g.Fence,
			Holder: who.Pubkey, HolderName: who.Name, AcquiredAt: now, RenewedAt: now, ExpiresAt: now.Add(r.TTL)})
	}
	return nil
}

// RenewReservations extends the caller's standing reservations of the
// grant fence to ttl from now and returns them; ErrReservationNotHeld
// when none stands (saying who forced them released, if someone did).
func (s *Store) RenewReservations(ctx context.Context, meshID, repo string, fence int64, ttl time.Duration, who LockHolder) ([]Reservation, error) {
	if repo == "" || messages.CheckLockRepo(repo) != nil {
		return nil, ErrInvalidReservationRepo
	}
	if ttl < messages.MinReservationTTL || ttl > messages.MaxReservationTTL {
		return nil, ErrInvalidReservationTTL
	}
	if fence < 1 {
		return nil, ErrInvalidFence
	}
	now := s.clock()
	var out []Reservation
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		rows, err := tx.QueryxContext(ctx, s.d.rewrite(`UPDATE reservation SET renewed_at = ?, expires_at = ?
			WHERE mesh_id = ? AND repo = ? AND holder = ? AND fence = ? AND released_by IS NULL AND expires_at > ? AND `+activeMember+`
			RETURNING repo, pattern, exclusive, fence, holder, holder_name, acquired_at, renewed_at, expires_at`),
			s.d.time(now), s.d.time(now.Add(ttl)), meshID, repo, who.Pubkey, fence, s.d.time(now), who.MemberID, meshID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanReservation(rows)
			if err != nil {
				return err
			}
			out = append(out, *r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("renew reservations: %w", err)
	}
	if len(out) > 0 {
		return out, nil
	}
	if err := s.memberActive(ctx, meshID, who.MemberID); err != nil {
		return nil, err
	}
	var by []string
	if err := s.rdb.SelectContext(ctx, &by, s.d.rewrite(`SELECT released_by FROM reservation
		WHERE mesh_id = ? AND repo = ? AND holder = ? AND fence = ? AND released_by IS NOT NULL`), meshID, repo, who.Pubkey, fence); err == nil && len(by) > 0 {
		return nil, fmt.Errorf("%w: %s forced them released (this holder had been gone too long)", ErrReservationNotHeld, by[0])
	}
	return nil, ErrReservationNotHeld
}

// ReleasedPattern is one pattern a release freed, with the fence token of
// the grant it stood under.
type ReleasedPattern struct {
	Pattern string
	Fence   int64
}

// ReleaseReservations frees the caller's standing reservations of
// patterns (none: all of them) in repo and returns the patterns released,
// in order. On PostgreSQL a release is announced to the other replicas
// with the commit.
func (s *Store) ReleaseReservations(ctx context.Context, meshID, origin, repo string, patterns []string, who LockHolder) ([]ReleasedPattern, error) {
	if repo == "" || messages.CheckLockRepo(repo) != nil {
		return nil, ErrInvalidReservationRepo
	}
	if _, err := parsePatterns(patterns, false); err != nil {
		return nil, err
	}
	released := []ReleasedPattern{}
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		rows, err := tx.QueryxContext(ctx, s.d.rewrite(`DELETE FROM reservation WHERE mesh_id = ? AND repo = ? AND holder = ?
			AND (? OR pattern IN (SELECT value FROM EACH(?))) RETURNING pattern, fence`), meshID, repo, who.Pubkey, len(patterns) == 0, jsonArray(patterns))
		if err != nil {
			return err
		}
		for rows.Next() {
			var p ReleasedPattern
			if err := rows.Scan(&p.Pattern, &p.Fence); err != nil {
				rows.Close()
				return err
			}
			released = append(released, p)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil || len(released) == 0 {
			return err
		}
		slices.SortFunc(released, func(a, b ReleasedPattern) int { return strings.Compare(a.Pattern, b.Pattern) })
		names := make([]string, len(released))
		for i, p := range released {
			names[i] = p.Pattern
		}
		return s.notifyReservationsReleased(ctx, tx, &ReservationsReleased{MeshID: meshID, Origin: origin, Repo: repo, Patterns: names})
	})
	if err != nil {
		return nil, fmt.Errorf("release reservations: %w", err)
	}
	return released, nil
}

// Reservations lists the mesh's standing reservations (of repo, unless it
// is ""), by repository, pattern and holder.
func (s *Store) Reservations(ctx context.Context, meshID, repo string) ([]Reservation, error) {
	if messages.CheckLockRepo(repo) != nil {
		return nil, ErrInvalidReservationRepo
	}
	out, err := queryAll(ctx, s, scanReservation, reservationSelect+` WHERE mesh_id = ? AND released_by IS NULL AND expires_at > ?
		AND (? = '' OR repo = ?) ORDER BY repo, pattern, holder`, meshID, s.d.time(s.clock()), repo, repo)
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", err)
	}
	return out, nil
}

// CheckPaths returns, for each of paths, the standing exclusive
// reservations of holders other than who that cover it (doublestar
// matches them), in the order of paths.
func (s *Store) CheckPaths(ctx context.Context, meshID, repo string, paths []string, who LockHolder) ([]PathConflict, error) {
	if repo == "" || messages.CheckLockRepo(repo) != nil {
		return nil, ErrInvalidReservationRepo
	}
	if err := messages.CheckPaths(paths); err != nil {
		if me, ok := err.(*messages.Error); ok && me.Code == messages.CodeTooManyPaths {
			return nil, ErrTooManyPaths
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidPath, err)
	}
	// A reservation covers only paths within its prefix: those whose
	// prefix is a path's directory (or the path) are the candidates.
	dirs := dirsOf(paths)
	held, err := queryAll(ctx, s, scanReservation, reservationSelect+` /*INDEXED BY reservation_prefix*/ WHERE mesh_id = ? AND repo = ?
		AND prefix IN (?`+strings.Repeat(`, ?`, len(dirs)-1)+`) AND holder <> ? AND exclusive AND released_by IS NULL AND expires_at > ?
		ORDER BY pattern, holder`, append(append([]any{meshID, repo}, dirs...), who.Pubkey, s.d.time(s.clock()))...)
	if err != nil {
		return nil, fmt.Errorf("check paths: %w", err)
	}
	out := []PathConflict{}
	for _, r := range held {
		p, err := pathglob.Parse(r.Pattern)
		for _, path := range paths {
			if err != nil || p.Covers(path) {
				out = append(out, PathConflict{Path: path, Reservation: r})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b PathConflict) int { return slices.Index(paths, a.Path) - slices.Index(paths, b.Path) })
	return out, nil
}

// SweepReservations deletes the reservations that ran out (or were forced
// released) an hour before now, and returns how many. A run-out
// reservation stands in no one's way without it; the hour lets a holder
// that comes back be told who forced its reservations released.
func (s *Store) SweepReservations(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.rewrite(`DELETE FROM reservation WHERE expires_at <= ?`), s.d.time(now.Add(-time.Hour)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sweep reservations: %w", err)
	}
	return n, nil
}
