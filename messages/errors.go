package messages

import (
	"errors"
	"fmt"
)

// ErrStoreUnavailable means the store did not answer in time; the request
// may or may not have been stored, and the caller retries with the same id.
var ErrStoreUnavailable = errors.New("store did not answer in time")

// Error is a request rejected with a specific code. The IPC server renders it
// as the JSON error envelope {"error": Code, "detail": Detail} with Status.
// A rejected request never changes stored state.
type Error struct {
	Status int    // HTTP status
	Code   string // machine-readable, stable
	Detail string // human-readable, may change
	// Candidates are the peers an ambiguous recipient names (409
	// ambiguous_recipient); the envelope carries them.
	Candidates []PeerCandidate
	// Attached are the daemon's meshes (400 mesh_required); State is the
	// key as it is (409 state_conflict).
	Attached []string
	State    *StateView
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Code
	}
	return e.Code + ": " + e.Detail
}

// Is makes errors.Is match any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func badRequest(code, format string, args ...any) *Error {
	return &Error{Status: 400, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Error codes shared by the server and the client. The codes the API
// answers are listed in docs/API.md ("Errors"), a feature's own in the doc
// it links for that feature.
const (
	CodeInvalidJSON          = "invalid_json"
	CodeUnknownField         = "unknown_field"
	CodePayloadTooLarge      = "payload_too_large"
	CodeMessageTooLarge      = "message_too_large"
	CodeMissingTo            = "missing_to"
	CodeInvalidTo            = "invalid_to"
	CodeMissingMessage       = "missing_message"
	CodeMessageHasNUL        = "message_contains_nul"
	CodeInvalidPriority      = "invalid_priority"
	CodeInvalidMeta          = "invalid_meta"
	CodeInvalidReplyTo       = "invalid_reply_to_id"
	CodeInvalidClientID      = "invalid_client_message_id"
	CodeIdempotencyKeyDiffer = "idempotency_key_mismatch"
	CodeMeshRequired         = "mesh_required"
	CodeMeshNotAttached      = "mesh_not_attached"
	CodeMemberRevoked        = "member_revoked"
	CodeIdempotencyReused    = "idempotency_key_reused"
	CodeInvalidQuery         = "invalid_query"
	CodeRowNotFound          = "outbox_row_not_found"
	CodeRequeueNotEligible   = "requeue_not_eligible"
	CodeDropNotEligible      = "drop_not_eligible"
	CodeClientIDInUse        = "client_message_id_in_use"
	CodeDaemonBusy           = "daemon_busy"
	CodeInsufficientStorage  = "insufficient_storage"
	CodeDegraded             = "daemon_degraded"
	CodeUnavailable          = "store_unavailable"
	CodeInternal             = "internal"
	// CodeBrokerUnavailable is the 503 of a request that needs a mesh's
	// broker connection while it is down.
	CodeBrokerUnavailable = "broker_unavailable"
)

// Deref is the string p points to, "" for nil: how the optional fields of
// the bodies here (*string, JSON null when absent) read as plain strings.
func Deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
