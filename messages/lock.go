package messages

import (
	"fmt"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"
)

// Fenced locks on the daemon: POST /v1/locks/{acquire,renew,release} and
// GET /v1/locks relay the lock frames through a mesh's broker connection
// (actors.BrokerConn). A lock taken as a session is renewed by the daemon
// while the session lives and released when it ends; a lock taken
// outside a session lasts its TTL unless renewed or taken again.

// Lock limits, the broker's (persistence/broker checks them again).
const (
	MaxLockKey     = 512
	MaxLockRepo    = 256
	MinLockTTL     = time.Second
	MaxLockTTL     = time.Hour
	DefaultLockTTL = 30 * time.Second
	MaxLockWait    = 10 * time.Minute
	// LockTimeout is how long one lock request waits for the broker's
	// answer.
	LockTimeout = 5 * time.Second
)

// LockRequest asks a mesh's broker connection for one lock operation; the
// reply is *LockReply. Op is a request frame type: TypeLockAcquire (Key,
// Repo, TTL, Wait: how long to wait for a held lock), TypeLockRenew (Key,
// Repo, Fence, TTL), TypeLockRelease (Key, Repo, Fence: 0 for any) or
// TypeListLocks (Repo: "" for every repository).
type LockRequest struct {
	Op    string
	Key   string
	Repo  string
	TTL   time.Duration
	Wait  time.Duration
	Fence int64
}

// LockReply is the reply to *LockRequest: Granted and Lock for an acquire
// or a renew (not granted: the lock as its holder has it), Released for a
// release, Locks for a list.
type LockReply struct {
	Granted  bool
	Lock     *LockInfo
	Released bool
	Locks    []LockInfo
	Err      error
}

// Failure returns the request's error, nil on success.
func (r *LockReply) Failure() error { return r.Err }

// IPC bodies of /v1/locks.

// LockAcquireRequest is the body of POST /v1/locks/acquire.
type LockAcquireRequest struct {
	Key  string `json:"key"`
	Repo string `json:"repo,omitempty"`
	// TTLMs is how long the lock is held without a renewal (0: 30 s).
	TTLMs int64 `json:"ttl_ms,omitempty"`
	// WaitMs is how long to wait for a lock another holds (0: answer at
	// once).
	WaitMs int64  `json:"wait_ms,omitempty"`
	Mesh   string `json:"mesh,omitempty"`
}

// Validate checks the body as the broker would.
func (r *LockAcquireRequest) Validate() error {
	if err := CheckLockName(r.Key, r.Repo); err != nil {
		return err
	}
	if err := checkLockTTL(r.TTLMs); err != nil {
		return err
	}
	if r.WaitMs < 0 || time.Duration(r.WaitMs)*time.Millisecond > MaxLockWait {
		return badRequest(CodeInvalidLockWait, "wait_ms is 0 to %d (10 minutes), got %d", MaxLockWait.Milliseconds(), r.WaitMs)
	}
	return nil
}

// LockRenewRequest is the body of POST /v1/locks/renew.
type LockRenewRequest struct {
	Key        string `json:"key"`
	Repo       string `json:"repo,omitempty"`
	FenceToken int64  `json:"fence_token"`
	TTLMs      int64  `json:"ttl_ms,omitempty"`
	Mesh       string `json:"mesh,omitempty"`
}

// Validate checks the body as the broker would.
func (r *LockRenewRequest) Validate() error {
	if err := CheckLockName(r.Key, r.Repo); err != nil {
		return err
	}
	if r.FenceToken < 1 {
		return badRequest(CodeInvalidFence, "fence_token is the token the acquire answered (1 or more), got %d", r.FenceToken)
	}
	return checkLockTTL(r.TTLMs)
}

// LockReleaseRequest is the body of POST /v1/locks/release.
type LockReleaseRequest struct {
	Key  string `json:"key"`
	Repo string `json:"repo,omitempty"`
	// FenceToken, when set, releases the lock only under that token.
	FenceToken int64  `json:"fence_token,omitempty"`
	Mesh       string `json:"mesh,omitempty"`
}

// Validate checks the body as the broker would.
func (r *LockReleaseRequest) Validate() error {
	if err := CheckLockName(r.Key, r.Repo); err != nil {
		return err
	}
	if r.FenceToken < 0 {
		return badRequest(CodeInvalidFence, "fence_token is the token the acquire answered, or absent, not %d", r.FenceToken)
	}
	return nil
}

// LockTTL is the TTL of ttlMs (0: DefaultLockTTL).
func LockTTL(ttlMs int64) time.Duration {
	if ttlMs == 0 {
		return DefaultLockTTL
	}
	return time.Duration(ttlMs) * time.Millisecond
}

func checkLockTTL(ttlMs int64) error {
	if ttl := LockTTL(ttlMs); ttlMs < 0 || ttl < MinLockTTL || ttl > MaxLockTTL {
		return badRequest(CodeInvalidLockTTL, "ttl_ms is %d (1 s) to %d (1 hour), or absent for 30 s; got %d",
			MinLockTTL.Milliseconds(), MaxLockTTL.Milliseconds(), ttlMs)
	}
	return nil
}

// CheckLockName refuses a key or a repository id the broker would
// (CheckLockKey, CheckLockRepo).
func CheckLockName(key, repo string) error {
	if err := CheckLockKey(key); err != nil {
		return err
	}
	return CheckLockRepo(repo)
}

// CheckLockKey refuses a key the broker would: 1-512 bytes of UTF-8 with
// no control characters.
func CheckLockKey(key string) error {
	if !printable(key) || key == "" || len(key) > MaxLockKey {
		return badRequest(CodeInvalidLockKey, "a lock key is 1-%d bytes of UTF-8 with no control characters (e.g. file:src/lib.rs), got %q",
			MaxLockKey, key)
	}
	return nil
}

// CheckLockRepo refuses a repository id the broker would: at most 256
// bytes of UTF-8 with no control characters ("" for none).
func CheckLockRepo(repo string) error {
	if !printable(repo) || len(repo) > MaxLockRepo {
		return badRequest(CodeInvalidLockRepo, "a repository id is at most %d bytes of UTF-8 with no control characters, got %q",
			MaxLockRepo, repo)
	}
	return nil
}

// printable reports whether s is UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// LockView is a lock as the IPC answers it: the broker's LockInfo and the
// mesh it is in.
type LockView struct {
	Mesh string `json:"mesh"`
	LockInfo
}

// LockAcquired is the answer of POST /v1/locks/acquire and renew: granted
// with the caller's lock (its fence token), or not granted with the lock as
// its holder has it.
type LockAcquired struct {
	Granted bool     `json:"granted"`
	Lock    LockView `json:"lock"`
}

// LockReleaseDone is the answer of POST /v1/locks/release: Released is
// false when the caller did not hold the lock (releasing is idempotent).
type LockReleaseDone struct {
	Released bool   `json:"released"`
	Key      string `json:"key"`
	Repo     string `json:"repo,omitempty"`
	Mesh     string `json:"mesh"`
}

// LockList is the answer of GET /v1/locks: the mesh's held locks.
type LockList struct {
	Mesh  string     `json:"mesh"`
	Locks []LockInfo `json:"locks"`
}

// LockNotHeld is the IPC error for a renewal of a lock the caller no
// longer holds.
func LockNotHeld(mesh, key string) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeLockNotHeld,
		Detail: fmt.Sprintf("mesh %s: the lock %q is not held under that fence token any more (it expired or another holder took it): "+
			"acquire it again, and redo what relied on it", mesh, key)}
}

// Lock transitions the daemon records (outbox.db): each is an audit entry,
// and a session's lock is also kept, to be renewed after a restart.
const (
	LockKindAcquired  = "acquired"
	LockKindReleased  = "released"
	LockKindLost      = "lost"
	LockKindAbandoned = "abandoned" // its session ended while the broker was out of reach: it runs out
)

// RecordLock asks the store to record a lock transition of a broker
// connection's route: the audit entry lock.<Kind>, and for Keep (a
// session's lock, acquired) the held lock, which any other kind forgets.
// The reply is *LockRecorded.
type RecordLock struct {
	ID     uint64 // echoed in the reply
	Route  string
	Mesh   string
	Holder string
	Repo   string
	Key    string
	Fence  int64
	TTL    time.Duration
	Kind   string
	Keep   bool
	Now    int64 // Unix ms
}

// LockRecorded is the reply to *RecordLock (its ID) and *AbandonHeldLocks.
type LockRecorded struct {
	ID  uint64
	Err error
}

// Failure returns the store's error, nil on success.
func (r *LockRecorded) Failure() error { return r.Err }

// HeldLocks asks the store for the locks a route keeps; the reply is
// *HeldLockList.
type HeldLocks struct{ Route string }

// HeldLock is one kept lock.
type HeldLock struct {
	Repo  string
	Key   string
	Mesh  string
	Fence int64
	TTL   time.Duration
}

// HeldLockList is the reply to *HeldLocks.
type HeldLockList struct {
	Locks []HeldLock
	Err   error
}

// Failure returns the store's error, nil on success.
func (r *HeldLockList) Failure() error { return r.Err }

// AbandonHeldLocks asks the store to forget the locks and the reservation
// grants of a route that will not come back (a session not restored at
// the start), each an audit entry lock.abandoned or
// reservation.abandoned. The reply is *LockRecorded.
type AbandonHeldLocks struct{ Route string }
