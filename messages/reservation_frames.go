package messages

// Reservation frames: file reservations held by the broker, per mesh and
// repository id — sets of gitignore-style path patterns (messages/pathglob),
// exclusive or shared, with a TTL and a fence token per grant. Upstream's
// broker has none; ours advertises the feature "reservations". A
// connection holds reservations as the key it sends with (a session its
// session key). reserve and reservation_renew are answered
// reservation_result, reservation_release reservation_released,
// list_reservations reservation_list, reservation_check
// reservation_check_result; a refused request is an error frame
// (CodeInvalid*, CodeReservationNotHeld, revoked). A release (or a forced
// one) is also pushed, as reservation_released without _reqId, to the
// mesh's connections (on every broker replica): waiters retry, and a
// holder whose reservations were forced released learns it.

// Reservation frame types.
const (
	TypeReserve                = "reserve"
	TypeReservationRenew       = "reservation_renew"
	TypeReservationRelease     = "reservation_release"
	TypeListReservations       = "list_reservations"
	TypeReservationCheck       = "reservation_check"
	TypeReservationResult      = "reservation_result"
	TypeReservationReleased    = "reservation_released"
	TypeReservationList        = "reservation_list"
	TypeReservationCheckResult = "reservation_check_result"
)

// Reservation error codes, of the error frame and of the IPC.
const (
	CodeInvalidPattern          = "invalid_pattern"
	CodeInvalidPath             = "invalid_path"
	CodeInvalidReservationRepo  = "invalid_reservation_repo"
	CodeInvalidReservationTTL   = "invalid_reservation_ttl"
	CodeTooManyPatterns         = "too_many_patterns"
	CodeTooManyReservations     = "too_many_reservations"
	CodeTooManyPaths            = "too_many_paths"
	CodeReservationNotHeld      = "reservation_not_held"
	CodeReservationsUnsupported = "reservations_unsupported"
)

// ReserveFrame asks for a grant of Patterns in Repo for TTLMs: all of them
// or none. Force releases first the reservations in the way whose holder
// has been gone (unrenewed) longer than the broker's threshold.
type ReserveFrame struct {
	Type      string   `json:"type"`
	Repo      string   `json:"repo"`
	Patterns  []string `json:"patterns"`
	Exclusive bool     `json:"exclusive"`
	TTLMs     int64    `json:"ttl_ms"`
	Force     bool     `json:"force,omitempty"`
	ReqID     string   `json:"_reqId,omitempty"`
}

// ReservationRenewFrame extends the caller's reservations of the grant
// FenceToken by TTLMs from now; refused (reservation_not_held) once none
// stands.
type ReservationRenewFrame struct {
	Type       string `json:"type"`
	Repo       string `json:"repo"`
	FenceToken int64  `json:"fence_token"`
	TTLMs      int64  `json:"ttl_ms"`
	ReqID      string `json:"_reqId,omitempty"`
}

// ReservationReleaseFrame frees the caller's reservations of Patterns
// (none: all of them) in Repo.
type ReservationReleaseFrame struct {
	Type     string   `json:"type"`
	Repo     string   `json:"repo"`
	Patterns []string `json:"patterns,omitempty"`
	ReqID    string   `json:"_reqId,omitempty"`
}

// ListReservationsFrame asks for the mesh's active reservations (of one
// repository when Repo is set).
type ListReservationsFrame struct {
	Type  string `json:"type"`
	Repo  string `json:"repo,omitempty"`
	ReqID string `json:"_reqId,omitempty"`
}

// ReservationCheckFrame asks which of Paths another holder reserves
// exclusively (the commit guard).
type ReservationCheckFrame struct {
	Type  string   `json:"type"`
	Repo  string   `json:"repo"`
	Paths []string `json:"paths"`
	ReqID string   `json:"_reqId,omitempty"`
}

// ReservationInfo is one reservation (a pattern) as the broker reports
// it: its grant's fence token, the holder's key and name, and when (ISO
// 8601) it was granted and runs out.
type ReservationInfo struct {
	Repo       string `json:"repo"`
	Pattern    string `json:"pattern"`
	Exclusive  bool   `json:"exclusive"`
	FenceToken int64  `json:"fence_token"`
	Holder     string `json:"holder"`
	HolderName string `json:"holder_name"`
	AcquiredAt string `json:"acquired_at"`
	ExpiresAt  string `json:"expires_at"`
}

// ReservationConflict is a reservation in the way of a request: Yours is
// the requested pattern it overlaps, Path a path both cover, Stale that
// its holder has been gone long enough to be forced.
type ReservationConflict struct {
	ReservationInfo
	Yours string `json:"yours"`
	Path  string `json:"path"`
	Stale bool   `json:"stale,omitempty"`
}

// ReservationResultFrame answers reserve and reservation_renew: Granted
// with the caller's reservations (one fence token), or refused with the
// conflicts. Forced lists the reservations a force released.
type ReservationResultFrame struct {
	Type         string                `json:"type"`
	Granted      bool                  `json:"granted"`
	Repo         string                `json:"repo"`
	FenceToken   int64                 `json:"fence_token,omitempty"`
	Reservations []ReservationInfo     `json:"reservations"`
	Conflicts    []ReservationConflict `json:"conflicts"`
	Forced       []ReservationInfo     `json:"forced,omitempty"`
	ReqID        string                `json:"_reqId,omitempty"`
}

// ReservationReleasedFrame answers reservation_release with the patterns
// released; pushed without ReqID to the mesh's connections, where Holder
// and ForcedBy say whose reservations another forced released.
type ReservationReleasedFrame struct {
	Type     string   `json:"type"`
	Repo     string   `json:"repo"`
	Patterns []string `json:"patterns"`
	// FenceTokens are, in the answer to a release, the fence token of the
	// grant each of Patterns stood under, in the same order.
	FenceTokens []int64 `json:"fence_tokens,omitempty"`
	Holder      string  `json:"holder,omitempty"`
	ForcedBy    string  `json:"forced_by,omitempty"`
	ReqID       string  `json:"_reqId,omitempty"`
}

// ReservationListFrame answers list_reservations, by repository and
// pattern.
type ReservationListFrame struct {
	Type         string            `json:"type"`
	Reservations []ReservationInfo `json:"reservations"`
	ReqID        string            `json:"_reqId,omitempty"`
}

// PathConflict is a path another holder reserves exclusively.
type PathConflict struct {
	Path string `json:"path"`
	ReservationInfo
}

// ReservationCheckResultFrame answers reservation_check.
type ReservationCheckResultFrame struct {
	Type      string         `json:"type"`
	Conflicts []PathConflict `json:"conflicts"`
	ReqID     string         `json:"_reqId,omitempty"`
}

func newReservationClientFrame(typ string) any {
	switch typ {
	case TypeReserve:
		return new(ReserveFrame)
	case TypeReservationRenew:
		return new(ReservationRenewFrame)
	case TypeReservationRelease:
		return new(ReservationReleaseFrame)
	case TypeListReservations:
		return new(ListReservationsFrame)
	case TypeReservationCheck:
		return new(ReservationCheckFrame)
	}
	return nil
}

// NewReservationBrokerFrame is the decoder table, for a client, of the
// broker's reservation frames: a pointer to the frame struct of typ, nil
// for another type.
func NewReservationBrokerFrame(typ string) any {
	switch typ {
	case TypeReservationResult:
		return new(ReservationResultFrame)
	case TypeReservationReleased:
		return new(ReservationReleasedFrame)
	case TypeReservationList:
		return new(ReservationListFrame)
	case TypeReservationCheckResult:
		return new(ReservationCheckResultFrame)
	}
	return nil
}
