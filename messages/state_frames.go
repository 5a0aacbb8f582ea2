package messages

import "encoding/json"

// Shared state frames (wire protocol §2.2), in the upstream broker's
// shapes: set_state answers the sender nothing and pushes state_change to
// every other connection of the mesh; get_state answers state_result
// (value null, strings "" for a missing key); list_state answers
// state_list. Beyond upstream: every key has a version, carried in the
// answers and in state_change; a set_state with if_version is a
// compare-and-set, refused with an error frame of code state_conflict that
// carries the key as it is (State); a set_state with _reqId is answered
// state_set with the new version. A set without _reqId, as upstream's
// clients send it, is answered only when it is refused.

// State frame types.
const (
	TypeSetState    = "set_state"
	TypeGetState    = "get_state"
	TypeListState   = "list_state"
	TypeStateChange = "state_change"
	TypeStateResult = "state_result"
	TypeStateList   = "state_list"
	TypeStateSet    = "state_set"
)

// State error codes, of the error frame and of the IPC.
const (
	CodeStateConflict      = "state_conflict"
	CodeStateNotFound      = "state_not_found"
	CodeInvalidStateKey    = "invalid_state_key"
	CodeInvalidStateValue  = "invalid_state_value"
	CodeStateValueTooLarge = "state_value_too_large"
	CodeInvalidIfVersion   = "invalid_if_version"
)

// SetStateFrame sets a key of the mesh's state to a JSON value.
type SetStateFrame struct {
	Type  string          `json:"type"`
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
	// IfVersion makes it a compare-and-set: 0 creates only, N replaces
	// version N only.
	IfVersion *int64 `json:"if_version,omitempty"`
	ReqID     string `json:"_reqId,omitempty"`
}

// GetStateFrame asks for one key; the answer is *StateResultFrame.
type GetStateFrame struct {
	Type  string `json:"type"`
	Key   string `json:"key"`
	ReqID string `json:"_reqId,omitempty"`
}

// ListStateFrame asks for every key; the answer is *StateListFrame.
type ListStateFrame struct {
	Type  string `json:"type"`
	ReqID string `json:"_reqId,omitempty"`
}

// StateInfo is one key as the broker reports it: who set it last by name
// (updatedBy, upstream's field) and key, when (ISO 8601), and its version.
// A missing key has value null, version 0 and empty strings.
type StateInfo struct {
	Key             string          `json:"key"`
	Value           json.RawMessage `json:"value"`
	UpdatedBy       string          `json:"updatedBy"`
	UpdatedByPubkey string          `json:"updatedByPubkey"`
	UpdatedAt       string          `json:"updatedAt"`
	Version         int64           `json:"version"`
}

// StateResultFrame answers get_state.
type StateResultFrame struct {
	Type string `json:"type"`
	StateInfo
	ReqID string `json:"_reqId,omitempty"`
}

// StateListFrame answers list_state, by key.
type StateListFrame struct {
	Type    string      `json:"type"`
	Entries []StateInfo `json:"entries"`
	ReqID   string      `json:"_reqId,omitempty"`
}

// StateChangeFrame is pushed to the mesh's other connections when a key is
// set.
type StateChangeFrame struct {
	Type string `json:"type"`
	StateInfo
}

// StateSetFrame answers a set_state that carried _reqId: the key's new
// version.
type StateSetFrame struct {
	Type    string `json:"type"`
	Key     string `json:"key"`
	Version int64  `json:"version"`
	ReqID   string `json:"_reqId,omitempty"`
}

func newStateClientFrame(typ string) any {
	switch typ {
	case TypeSetState:
		return new(SetStateFrame)
	case TypeGetState:
		return new(GetStateFrame)
	case TypeListState:
		return new(ListStateFrame)
	}
	return nil
}

// NewStateBrokerFrame is the decoder table, for a client, of the broker's
// state frames: a pointer to the frame struct of typ, nil for another type.
func NewStateBrokerFrame(typ string) any {
	switch typ {
	case TypeStateResult:
		return new(StateResultFrame)
	case TypeStateList:
		return new(StateListFrame)
	case TypeStateChange:
		return new(StateChangeFrame)
	case TypeStateSet:
		return new(StateSetFrame)
	}
	return nil
}
