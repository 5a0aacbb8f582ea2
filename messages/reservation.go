package messages

import (
	"fmt"
	"net/http"
	"time"

	"github.com/claudemesh/claudemesh-go/messages/pathglob"
)

// File reservations on the daemon: POST /v1/reservations,
// /v1/reservations/release and /v1/reservations/check, GET
// /v1/reservations relay the reservation frames through a mesh's broker
// connection (actors.BrokerConn). A session's reservations are renewed by
// the daemon while it lives and released when it ends; reservations made
// outside a session last their TTL.

// Reservation limits, the broker's (persistence/broker checks them again).
const (
	MaxReservePatterns = 32
	// MaxReservationsPerMember bounds the standing reservations one member
	// (its own and its sessions') holds in one repository.
	MaxReservationsPerMember = 1000
	MaxCheckPaths            = 256
	MaxCheckPathBytes        = 48 << 10
	MinReservationTTL        = time.Second
	MaxReservationTTL        = time.Hour
	DefaultReservationTTL    = 5 * time.Minute
	MaxReservationWait       = 10 * time.Minute
	// ReservationRenewEvery bounds the time between two renewals of a
	// session's reservations (a third of the TTL when that is shorter):
	// the broker counts a holder unheard for ReservationStaleAfter as gone.
	ReservationRenewEvery = 20 * time.Second
	ReservationStaleAfter = 90 * time.Second
	// ReservationTimeout is how long one request waits for the broker.
	ReservationTimeout = 5 * time.Second
)

// NotStale says why force did not release a conflict: its holder is not
// gone (force releases only a holder unheard for the broker's threshold).
var NotStale = fmt.Sprintf("not released by force: its holder renewed it lately, and force releases only a holder "+
	"the broker has not heard from for its threshold (%s unless the broker is started with another)",
	DurationWords(ReservationStaleAfter))

// ReserveRequest is the body of POST /v1/reservations.
type ReserveRequest struct {
	Repo     string   `json:"repo"`
	Patterns []string `json:"patterns"`
	// Shared asks for a shared reservation (default: exclusive).
	Shared bool `json:"shared,omitempty"`
	// TTLMs is how long it outlives its holder's last renewal (0: 5 min).
	TTLMs int64 `json:"ttl_ms,omitempty"`
	// WaitMs is how long to wait while others' reservations are in the way
	// (0: answer at once).
	WaitMs int64 `json:"wait_ms,omitempty"`
	// Force releases the reservations in the way whose holder has been gone
	// longer than the broker's threshold.
	Force bool   `json:"force,omitempty"`
	Mesh  string `json:"mesh,omitempty"`
}

// Validate checks the body as the broker would.
func (r *ReserveRequest) Validate() error {
	if err := CheckReservationRepo(r.Repo); err != nil {
		return err
	}
	if err := CheckPatterns(r.Patterns, true); err != nil {
		return err
	}
	if ttl := ReservationTTL(r.TTLMs); r.TTLMs < 0 || ttl < MinReservationTTL || ttl > MaxReservationTTL {
		return badRequest(CodeInvalidReservationTTL, "ttl_ms is %d (1 s) to %d (1 hour), or absent for 5 minutes; got %d",
			MinReservationTTL.Milliseconds(), MaxReservationTTL.Milliseconds(), r.TTLMs)
	}
	if r.WaitMs < 0 || time.Duration(r.WaitMs)*time.Millisecond > MaxReservationWait {
		return badRequest(CodeInvalidLockWait, "wait_ms is 0 to %d (10 minutes), got %d", MaxReservationWait.Milliseconds(), r.WaitMs)
	}
	return nil
}

// ReservationTTL is the TTL of ttlMs (0: DefaultReservationTTL).
func ReservationTTL(ttlMs int64) time.Duration {
	if ttlMs == 0 {
		return DefaultReservationTTL
	}
	return time.Duration(ttlMs) * time.Millisecond
}

// ReleaseReservationsRequest is the body of POST /v1/reservations/release:
// the caller's reservations of Patterns (none: all) in Repo.
type ReleaseReservationsRequest struct {
	Repo     string   `json:"repo"`
	Patterns []string `json:"patterns,omitempty"`
	Mesh     string   `json:"mesh,omitempty"`
}

// Validate checks the body as the broker would.
func (r *ReleaseReservationsRequest) Validate() error {
	if err := CheckReservationRepo(r.Repo); err != nil {
		return err
	}
	return CheckPatterns(r.Patterns, false)
}

// CheckPathsRequest is the body of POST /v1/reservations/check: which of
// Paths another holder reserves exclusively.
type CheckPathsRequest struct {
	Repo  string   `json:"repo"`
	Paths []string `json:"paths"`
	Mesh  string   `json:"mesh,omitempty"`
}

// Validate checks the body as the broker would.
func (r *CheckPathsRequest) Validate() error {
	if err := CheckReservationRepo(r.Repo); err != nil {
		return err
	}
	return CheckPaths(r.Paths)
}

// CheckReservationRepo refuses a repository id the broker would: 1-256
// bytes of UTF-8 with no control characters.
func CheckReservationRepo(repo string) error {
	if repo == "" || CheckLockRepo(repo) != nil {
		return badRequest(CodeInvalidReservationRepo, "a reservation's repository id is 1-%d bytes of UTF-8 with no control characters "+
			"(claudemesh names a git repository git:<root commit>), got %q", MaxLockRepo, repo)
	}
	return nil
}

// CheckPatterns refuses a pattern list the broker would: 1-32 patterns
// (0 too, unless required), each one pathglob.Parse accepts.
func CheckPatterns(patterns []string, required bool) error {
	if len(patterns) > MaxReservePatterns || (required && len(patterns) == 0) {
		return badRequest(CodeTooManyPatterns, "a reservation has 1-%d patterns, got %d", MaxReservePatterns, len(patterns))
	}
	for _, p := range patterns {
		if _, err := pathglob.Parse(p); err != nil {
			return badRequest(CodeInvalidPattern, "%s", err)
		}
	}
	return nil
}

// CheckPaths refuses a path list the broker would: 1-256 paths, at most
// 48 KiB in all, each one pathglob.CheckPath accepts.
func CheckPaths(paths []string) error {
	size := 0
	for _, p := range paths {
		size += len(p)
	}
	if len(paths) == 0 || len(paths) > MaxCheckPaths || size > MaxCheckPathBytes {
		return badRequest(CodeTooManyPaths, "a check names 1-%d paths of at most %d bytes in all, got %d (%d bytes): ask in parts",
			MaxCheckPaths, MaxCheckPathBytes, len(paths), size)
	}
	for _, p := range paths {
		if err := pathglob.CheckPath(p); err != nil {
			return badRequest(CodeInvalidPath, "%s", err)
		}
	}
	return nil
}

// ReservationRequest asks a mesh's broker connection for one reservation
// operation; the reply is *ReservationReply. Op is a request frame type:
// TypeReserve (Repo, Patterns, Exclusive, TTL, Wait, Force),
// TypeReservationRelease (Repo, Patterns), TypeListReservations (Repo: ""
// for all) or TypeReservationCheck (Repo, Paths).
type ReservationRequest struct {
	Op        string
	Repo      string
	Patterns  []string
	Paths     []string
	Exclusive bool
	Force     bool
	TTL       time.Duration
	Wait      time.Duration
}

// ReservationReply is the reply to *ReservationRequest: Result for a
// reserve, Released for a release, List for a list, Check for a check.
type ReservationReply struct {
	Result   *ReservationResultFrame
	Released []string
	List     []ReservationInfo
	Check    []PathConflict
	Err      error
}

// Failure returns the request's error, nil on success.
func (r *ReservationReply) Failure() error { return r.Err }

// Reserved is the answer of POST /v1/reservations: granted with the
// caller's reservations (their fence token), or refused with the
// conflicts.
type Reserved struct {
	Mesh         string                `json:"mesh"`
	Granted      bool                  `json:"granted"`
	Repo         string                `json:"repo"`
	FenceToken   int64                 `json:"fence_token,omitempty"`
	Reservations []ReservationInfo     `json:"reservations"`
	Conflicts    []ReservationConflict `json:"conflicts"`
	Forced       []ReservationInfo     `json:"forced,omitempty"`
}

// ReservationsReleased is the answer of POST /v1/reservations/release.
type ReservationsReleased struct {
	Mesh     string   `json:"mesh"`
	Repo     string   `json:"repo"`
	Released []string `json:"released"`
}

// ReservationList is the answer of GET /v1/reservations.
type ReservationList struct {
	Mesh         string            `json:"mesh"`
	Reservations []ReservationInfo `json:"reservations"`
}

// PathCheck is the answer of POST /v1/reservations/check.
type PathCheck struct {
	Mesh      string         `json:"mesh"`
	Conflicts []PathConflict `json:"conflicts"`
}

// ReservationsUnsupported is the 501 for a broker without reservations.
func ReservationsUnsupported(mesh string) *Error {
	return &Error{Status: http.StatusNotImplemented, Code: CodeReservationsUnsupported,
		Detail: fmt.Sprintf("the broker of mesh %s has no file reservations (it is upstream's, or older): run claudemesh-go's broker for them", mesh)}
}

// RecordReservation asks the store to record a grant transition of a
// broker connection's route: the audit entry reservation.<Kind> (a
// LockKind*), and for Keep (a session's grant, acquired) the held grant,
// which any other kind forgets. The reply is *ReservationRecorded (its ID).
type RecordReservation struct {
	ID       uint64 // echoed in the reply
	Route    string
	Mesh     string
	Holder   string
	Repo     string
	Fence    int64
	Patterns []string
	// Remaining are, for a release of part of a kept grant, the patterns
	// it keeps: its held grant is narrowed to them instead of forgotten.
	Remaining []string
	TTL       time.Duration
	Kind      string
	Keep      bool
	Now       int64 // Unix ms
}

// ReservationRecorded is the reply to *RecordReservation (its ID).
type ReservationRecorded struct {
	ID  uint64
	Err error
}

// Failure returns the store's error, nil on success.
func (r *ReservationRecorded) Failure() error { return r.Err }

// HeldReservations asks the store for the grants a route keeps; the reply
// is *HeldReservationList.
type HeldReservations struct{ Route string }

// HeldReservation is one kept grant.
type HeldReservation struct {
	Repo     string
	Mesh     string
	Fence    int64
	Patterns []string
	TTL      time.Duration
}

// HeldReservationList is the reply to *HeldReservations.
type HeldReservationList struct {
	Grants []HeldReservation
	Err    error
}

// Failure returns the store's error, nil on success.
func (r *HeldReservationList) Failure() error { return r.Err }
