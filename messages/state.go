package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// Shared state on the daemon: GET/POST /v1/state relay the §2.2 frames
// through a mesh's broker connection (actors.BrokerConn), and a
// state_change the broker pushes becomes the SSE event state_change.

// State limits, the broker's (persistence/broker checks them again).
const (
	MaxStateKey   = 256
	MaxStateValue = 64 << 10
)

// StateRequest asks a mesh's broker connection for one state operation;
// the reply is *StateReply. Op is a request frame type: TypeGetState
// (Key), TypeListState, or TypeSetState (Key, Value, IfVersion).
type StateRequest struct {
	Op        string
	Key       string
	Value     json.RawMessage
	IfVersion *int64
}

// StateReply is the reply to *StateRequest: Entry for a get (Version 0: no
// such key), Entries for a list, Version for a set (0 when the broker
// does not tell: upstream's answers a set with nothing).
type StateReply struct {
	Entry   *StateInfo
	Entries []StateInfo
	Version int64
	Err     error
}

// Failure returns the request's error, nil on success.
func (r *StateReply) Failure() error { return r.Err }

// IPC bodies of /v1/state.

// StateSetRequest is the body of POST /v1/state.
type StateSetRequest struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
	// IfVersion makes the set a compare-and-set: 0 creates only, N
	// replaces version N only; a mismatch is 409 state_conflict.
	IfVersion *int64 `json:"if_version,omitempty"`
	Mesh      string `json:"mesh,omitempty"`
}

// Validate checks the body as the broker would, so that a refused set
// never leaves the daemon.
func (r *StateSetRequest) Validate() error {
	if err := CheckStateKey(r.Key); err != nil {
		return err
	}
	if _, err := CompactStateValue(r.Value); err != nil {
		return err
	}
	if r.IfVersion != nil && *r.IfVersion < 0 {
		return badRequest(CodeInvalidIfVersion, "if_version is 0 (the key must not exist yet) or the version to replace, not %d", *r.IfVersion)
	}
	return nil
}

// CheckStateKey refuses a key the broker would: 1-256 bytes of UTF-8 with
// no control characters.
func CheckStateKey(key string) error {
	if key == "" || len(key) > MaxStateKey || !printable(key) {
		return badRequest(CodeInvalidStateKey, "a state key is 1-%d bytes of UTF-8 with no control characters, got %q", MaxStateKey, key)
	}
	return nil
}

// CompactStateValue returns value as compact JSON, or refuses it as the
// broker would: missing, not one JSON value, or over MaxStateValue.
func CompactStateValue(value json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(value)) == 0 {
		return nil, badRequest(CodeInvalidStateValue, "missing 'value': give the key a JSON value (null included)")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, value); err != nil {
		return nil, badRequest(CodeInvalidStateValue, "'value' is not one JSON value: %v", err)
	}
	if buf.Len() > MaxStateValue {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeStateValueTooLarge,
			Detail: fmt.Sprintf("the value is %d bytes of compact JSON; a state value is at most %d", buf.Len(), MaxStateValue)}
	}
	return buf.Bytes(), nil
}

// StateView is a key as the IPC answers it: the broker's StateInfo and the
// mesh it is in.
type StateView struct {
	Mesh string `json:"mesh"`
	StateInfo
}

// StateGot is the answer of GET /v1/state?key= (upstream's shape).
type StateGot struct {
	State StateView `json:"state"`
}

// StateList is the answer of GET /v1/state: the mesh's keys, by key.
type StateList struct {
	Mesh    string      `json:"mesh"`
	Entries []StateInfo `json:"entries"`
}

// StateSetDone is the answer of POST /v1/state (upstream's shape, and the
// new version: 0 when the broker does not tell).
type StateSetDone struct {
	OK      bool   `json:"ok"`
	Key     string `json:"key"`
	Mesh    string `json:"mesh"`
	Version int64  `json:"version"`
}

// StateNotFound is the IPC error for a key the mesh's state lacks.
func StateNotFound(mesh, key string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeStateNotFound,
		Detail: fmt.Sprintf("mesh %s has no state key %q: list them with `claudemesh state list`", mesh, key)}
}

// StateConflict is the IPC error for a compare-and-set that did not match:
// current is the key as it is (version 0: it does not exist).
func StateConflict(mesh string, ifVersion int64, current StateInfo) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeStateConflict, State: &StateView{Mesh: mesh, StateInfo: current},
		Detail: fmt.Sprintf("state key %q is at version %d, not %d: read it again (`claudemesh state get %s`) and retry with --if-version %d",
			current.Key, current.Version, ifVersion, current.Key, current.Version)}
}
