package broker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Fenced advisory locks. A lock is granted by one conditional upsert (no
// lock manager, no read before the write): the row is taken when it is
// free, expired, or already the caller's. Its fence token grows by one
// with every grant to a new holder and never goes back (rows outlive their
// locks), so whoever a holder writes to can refuse a stale one by its
// token. An expired lock is free at once; the sweep only tidies rows.

// Lock errors; each wraps ErrInvalid, or is ErrLockNotHeld.
var (
	ErrInvalidLockKey  = fmt.Errorf("%w: a lock key is 1-%d bytes of UTF-8 with no control characters", ErrInvalid, messages.MaxLockKey)
	ErrInvalidLockRepo = fmt.Errorf("%w: a repository id is at most %d bytes of UTF-8 with no control characters", ErrInvalid, messages.MaxLockRepo)
	ErrInvalidLockTTL  = fmt.Errorf("%w: a lock's TTL is %v to %v", ErrInvalid, messages.MinLockTTL, messages.MaxLockTTL)
	ErrInvalidFence    = fmt.Errorf("%w: a fence token is 1 or more", ErrInvalid)
	// ErrLockNotHeld is a renewal by a caller that no longer holds the
	// lock under its token: it expired, or another holder took it.
	ErrLockNotHeld = errors.New("lock not held")
)

// Lock is one lock of a mesh: the last fence token granted and, while it
// is held, its holder.
type Lock struct {
	Repo       string
	Key        string
	Fence      int64
	Holder     string // pubkey, "" when free
	HolderName string
	AcquiredAt time.Time
	ExpiresAt  time.Time
}

// LockHolder is who asks: the key the connection sends with, its name and
// its member (which must be active).
type LockHolder struct {
	Pubkey   string
	Name     string
	MemberID string
}

func checkLock(repo, key string) error {
	switch {
	case messages.CheckLockKey(key) != nil:
		return ErrInvalidLockKey
	case messages.CheckLockRepo(repo) != nil:
		return ErrInvalidLockRepo
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < messages.MinLockTTL || ttl > messages.MaxLockTTL {
		return ErrInvalidLockTTL
	}
	return nil
}

// AcquireLock grants the lock to who for ttl and returns it, granted true;
// or, when another holds it, returns it as the other holds it, granted
// false. A holder that asks again extends its lock under the same token.
// A revoked member is ErrMemberRevoked.
func (s *Store) AcquireLock(ctx context.Context, meshID, repo, key string, ttl time.Duration, who LockHolder) (*Lock, bool, error) {
	if err := checkLock(repo, key); err != nil {
		return nil, false, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, false, err
	}
	now := s.clock()
	t, exp := s.d.time(now), s.d.time(now.Add(ttl))
	// Held by the caller and not expired: the same grant, extended.
	const mine = `mesh_lock.holder = excluded.holder AND mesh_lock.expires_at > ?`
	query := `INSERT INTO mesh_lock (mesh_id, repo, key, fence, holder, holder_name, member_id, acquired_at, expires_at)
		SELECT ?, ?, ?, 1, ?, ?, ?, ?, ? WHERE ` + activeMember + `
		ON CONFLICT (mesh_id, repo, key) DO UPDATE SET
			fence = CASE WHEN ` + mine + ` THEN mesh_lock.fence ELSE mesh_lock.fence + 1 END,
			acquired_at = CASE WHEN ` + mine + ` THEN mesh_lock.acquired_at ELSE excluded.acquired_at END,
			holder = excluded.holder, holder_name = excluded.holder_name, member_id = excluded.member_id,
			expires_at = excluded.expires_at
		WHERE mesh_lock.holder IS NULL OR mesh_lock.expires_at <= ? OR mesh_lock.holder = excluded.holder
		RETURNING fence, acquired_at`
	args := []any{meshID, repo, key, who.Pubkey, who.Name, who.MemberID, t, exp, who.MemberID, meshID, t, t, t}
	var lock *Lock
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		rows, err := tx.QueryxContext(ctx, s.d.rewrite(query), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		if rows.Next() {
			lock = &Lock{Repo: repo, Key: key, Holder: who.Pubkey, HolderName: who.Name, ExpiresAt: now.Add(ttl)}
			if err := rows.Scan(&lock.Fence, (*dbTime)(&lock.AcquiredAt)); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, false, fmt.Errorf("acquire lock: %w", err)
	}
	if lock != nil {
		return lock, true, nil
	}
	if err := s.memberActive(ctx, meshID, who.MemberID); err != nil {
		return nil, false, err
	}
	held, err := s.lock(ctx, meshID, repo, key)
	if err != nil {
		return nil, false, fmt.Errorf("acquire lock: %w", err)
	}
	return held, false, nil
}

// RenewLock extends the caller's lock under fence to ttl from now and
// returns it; ErrLockNotHeld when the caller no longer holds it so.
func (s *Store) RenewLock(ctx context.Context, meshID, repo, key string, fence int64, ttl time.Duration, who LockHolder) (*Lock, error) {
	if err := checkLock(repo, key); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	if fence < 1 {
		return nil, ErrInvalidFence
	}
	now := s.clock()
	lock := &Lock{Repo: repo, Key: key, Fence: fence, Holder: who.Pubkey, HolderName: who.Name, ExpiresAt: now.Add(ttl)}
	var renewed bool
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		row := tx.QueryRowxContext(ctx, s.d.rewrite(`UPDATE mesh_lock SET expires_at = ?
			WHERE mesh_id = ? AND repo = ? AND key = ? AND holder = ? AND fence = ? AND expires_at > ? AND `+activeMember+`
			RETURNING acquired_at`), s.d.time(lock.ExpiresAt), meshID, repo, key, who.Pubkey, fence, s.d.time(now), who.MemberID, meshID)
		switch err := row.Scan((*dbTime)(&lock.AcquiredAt)); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		renewed = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("renew lock: %w", err)
	}
	if !renewed {
		if err := s.memberActive(ctx, meshID, who.MemberID); err != nil {
			return nil, err
		}
		return nil, ErrLockNotHeld
	}
	return lock, nil
}

// ReleaseLock frees the caller's lock (under fence, when it is not 0) and
// returns the fence token it was held under: 0 when the caller did not
// hold it. Releasing is idempotent; a revoked
// member's locks run out with their TTL. On PostgreSQL a release is
// announced to the other replicas with the commit (origin is the
// releasing broker, which tells its own connections itself).
func (s *Store) ReleaseLock(ctx context.Context, meshID, origin, repo, key string, fence int64, who LockHolder) (int64, error) {
	if err := checkLock(repo, key); err != nil {
		return 0, err
	}
	if fence < 0 {
		return 0, ErrInvalidFence
	}
	now := s.d.time(s.clock())
	var held int64
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		err := tx.QueryRowxContext(ctx, s.d.rewrite(`UPDATE mesh_lock SET holder = NULL, holder_name = '', member_id = NULL, expires_at = ?
			WHERE mesh_id = ? AND repo = ? AND key = ? AND holder = ? AND (? = 0 OR fence = ?) AND expires_at > ? RETURNING fence`),
			now, meshID, repo, key, who.Pubkey, fence, fence, now).Scan(&held)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		return s.notifyLockReleased(ctx, tx, &LockReleased{MeshID: meshID, Origin: origin, Repo: repo, Key: key})
	})
	if err != nil {
		return 0, fmt.Errorf("release lock: %w", err)
	}
	return held, nil
}

const lockSelect = `SELECT repo, key, fence, coalesce(holder, ''), holder_name, acquired_at, expires_at FROM mesh_lock`

func scanLock(row interface{ Scan(...any) error }) (*Lock, error) {
	var l Lock
	if err := row.Scan(&l.Repo, &l.Key, &l.Fence, &l.Holder, &l.HolderName, (*dbTime)(&l.AcquiredAt), (*dbTime)(&l.ExpiresAt)); err != nil {
		return nil, err
	}
	return &l, nil
}

// lock reads one lock (nil: never taken).
func (s *Store) lock(ctx context.Context, meshID, repo, key string) (*Lock, error) {
	l, err := scanLock(s.rdb.QueryRowxContext(ctx, s.d.rewrite(lockSelect+` WHERE mesh_id = ? AND repo = ? AND key = ?`), meshID, repo, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return l, err
}

// Locks lists the mesh's held locks (of repo, unless all), by repository
// and key.
func (s *Store) Locks(ctx context.Context, meshID, repo string, all bool) ([]Lock, error) {
	locks, err := queryAll(ctx, s, scanLock, lockSelect+` WHERE mesh_id = ? AND holder IS NOT NULL AND expires_at > ?
		AND (? OR repo = ?) ORDER BY repo, key`, meshID, s.d.time(s.clock()), all, repo)
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	return locks, nil
}

// SweepLocks frees every lock expired by now and returns how many. An
// expired lock is free without it; the sweep keeps the held-lock index
// small and the table readable.
func (s *Store) SweepLocks(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.rewrite(`UPDATE mesh_lock SET holder = NULL, holder_name = '', member_id = NULL
			WHERE holder IS NOT NULL AND expires_at <= ?`), s.d.time(now))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sweep locks: %w", err)
	}
	return n, nil
}
