package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// Broker WebSocket frames (wire protocol §1–2, plus the delivery-contract
// extensions of the spec: feature negotiation and the extended ack). Every
// frame is one JSON object with a string "type". Field names are the
// upstream broker's, camelCase included, so the upstream daemon can use our
// broker; unknown fields are ignored on decode for the same reason.

// Frame types.
const (
	TypeHello                      = "hello"
	TypeSessionHello               = "session_hello"
	TypeHelloAck                   = "hello_ack"
	TypeSend                       = "send"
	TypeAck                        = "ack"
	TypePush                       = "push"
	TypeClientAck                  = "client_ack"
	TypeListPeers                  = "list_peers"
	TypePeersList                  = "peers_list"
	TypeSetStatus                  = "set_status"
	TypeSetSummary                 = "set_summary"
	TypeSetVisible                 = "set_visible"
	TypeSetProfile                 = "set_profile"
	TypeError                      = "error"
	TypeFeatureNegotiationRequest  = "feature_negotiation_request"
	TypeFeatureNegotiationResponse = "feature_negotiation_response"
	TypeFeatureNegotiationFailed   = "feature_negotiation_failed"
)

// Group is a group membership claimed in a hello.
type Group struct {
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
}

// Hello channels: a daemon's member connection (ours and upstream's say
// so), and our CLI's own short member connections (a send without the
// daemon, a benchmark), which are not nodes (node_frames.go).
const (
	ChannelDaemon = "claudemesh-daemon"
	ChannelCLI    = "claudemesh-cli"
)

// HelloFrame authenticates a member connection: Signature is ed25519 over
// "meshId|memberId|pubkey|timestamp" by the member key (hex).
type HelloFrame struct {
	Type          string  `json:"type"`
	MeshID        string  `json:"meshId"`
	MemberID      string  `json:"memberId"`
	Pubkey        string  `json:"pubkey"`
	SessionPubkey string  `json:"sessionPubkey,omitempty"`
	DisplayName   string  `json:"displayName,omitempty"`
	SessionID     string  `json:"sessionId"`
	PID           int     `json:"pid,omitempty"`
	Cwd           string  `json:"cwd,omitempty"`
	Hostname      string  `json:"hostname,omitempty"`
	PeerType      string  `json:"peerType,omitempty"`
	Channel       string  `json:"channel,omitempty"`
	Groups        []Group `json:"groups,omitempty"`
	// DaemonVersion is our daemon's version, recorded with its node
	// (upstream's daemon sends none; brokers that do not list nodes
	// ignore it).
	DaemonVersion string `json:"daemonVersion,omitempty"`
	Timestamp     int64  `json:"timestamp"`
	Signature     string `json:"signature"`
}

// Attestation is a member key vouching for a session key until ExpiresAt.
type Attestation struct {
	SessionPubkey      string `json:"sessionPubkey"`
	ParentMemberPubkey string `json:"parentMemberPubkey"`
	ExpiresAt          int64  `json:"expiresAt"`
	Signature          string `json:"signature"`
}

// SessionHelloFrame authenticates a per-launch session connection.
type SessionHelloFrame struct {
	Type               string      `json:"type"`
	MeshID             string      `json:"meshId"`
	ParentMemberID     string      `json:"parentMemberId,omitempty"`
	ParentMemberPubkey string      `json:"parentMemberPubkey"`
	SessionPubkey      string      `json:"sessionPubkey"`
	ParentAttestation  Attestation `json:"parentAttestation"`
	DisplayName        string      `json:"displayName,omitempty"`
	SessionID          string      `json:"sessionId"`
	PID                int         `json:"pid,omitempty"`
	Cwd                string      `json:"cwd,omitempty"`
	Hostname           string      `json:"hostname,omitempty"`
	PeerType           string      `json:"peerType,omitempty"`
	Channel            string      `json:"channel,omitempty"`
	Groups             []Group     `json:"groups,omitempty"`
	Timestamp          int64       `json:"timestamp"`
	Signature          string      `json:"signature"`
}

// HelloAckFrame accepts a hello.
type HelloAckFrame struct {
	Type              string `json:"type"`
	PresenceID        string `json:"presenceId"`
	MemberDisplayName string `json:"memberDisplayName"`
}

// AckFrame answers a send: the upstream fields (ID, MessageID, Queued,
// Error) and the delivery contract's (Code 201 created, 200 duplicate,
// 409 idempotency_key_reused, other 4xx/5xx rejections).
type AckFrame struct {
	Type                    string  `json:"type"`
	ID                      string  `json:"id"`
	MessageID               string  `json:"messageId"`
	Queued                  bool    `json:"queued"`
	Error                   string  `json:"error,omitempty"`
	ClientMessageID         string  `json:"client_message_id,omitempty"`
	Code                    int     `json:"code,omitempty"`
	BrokerMessageID         string  `json:"broker_message_id,omitempty"`
	HistoryID               string  `json:"history_id,omitempty"`
	Duplicate               bool    `json:"duplicate,omitempty"`
	HistoryAvailable        *bool   `json:"history_available,omitempty"`
	FirstSeenAt             string  `json:"first_seen_at,omitempty"`
	Conflict                string  `json:"conflict,omitempty"`
	BrokerFingerprintPrefix string  `json:"broker_fingerprint_prefix,omitempty"`
	RetryAfterMs            *int64  `json:"retry_after_ms,omitempty"`
	ReqID                   *string `json:"_reqId,omitempty"`
}

// PushFrame delivers a message (or, with Subtype "system", a presence
// event). ClientMessageID is echoed on every kind of push.
type PushFrame struct {
	Type               string          `json:"type"`
	MessageID          string          `json:"messageId"`
	MeshID             string          `json:"meshId"`
	SenderPubkey       string          `json:"senderPubkey"`
	SenderMemberPubkey string          `json:"senderMemberPubkey,omitempty"`
	SenderName         string          `json:"senderName,omitempty"`
	TargetSpec         string          `json:"targetSpec,omitempty"`
	Topic              string          `json:"topic,omitempty"`
	ReplyToID          string          `json:"replyToId,omitempty"`
	Priority           string          `json:"priority"`
	Nonce              string          `json:"nonce"`
	Ciphertext         string          `json:"ciphertext"`
	CreatedAt          string          `json:"createdAt"`
	ClientMessageID    string          `json:"client_message_id,omitempty"`
	RequestFingerprint string          `json:"request_fingerprint,omitempty"`
	HistoryID          string          `json:"history_id,omitempty"`
	Meta               json.RawMessage `json:"meta,omitempty"`
	Subtype            string          `json:"subtype,omitempty"`
	Event              string          `json:"event,omitempty"`
	EventData          json.RawMessage `json:"eventData,omitempty"`
}

// ClientAckFrame marks a pushed message delivered (camelCase on the wire).
type ClientAckFrame struct {
	Type            string `json:"type"`
	ClientMessageID string `json:"clientMessageId,omitempty"`
	BrokerMessageID string `json:"brokerMessageId,omitempty"`
}

// ListPeersFrame asks for the peer list; the answer is *PeersListFrame.
type ListPeersFrame struct {
	Type  string `json:"type"`
	ReqID string `json:"_reqId,omitempty"`
}

// Peer is one connected presence in a peer list.
type Peer struct {
	Pubkey       string   `json:"pubkey"`
	MemberPubkey string   `json:"memberPubkey"`
	DisplayName  string   `json:"displayName"`
	Status       string   `json:"status"`
	Summary      string   `json:"summary"`
	Groups       []Group  `json:"groups"`
	SessionID    string   `json:"sessionId"`
	ConnectedAt  string   `json:"connectedAt"`
	Cwd          string   `json:"cwd,omitempty"`
	PeerRole     string   `json:"peerRole"`
	Hostname     string   `json:"hostname,omitempty"`
	PeerType     string   `json:"peerType,omitempty"`
	Channel      string   `json:"channel,omitempty"`
	Visible      bool     `json:"visible"`
	Avatar       string   `json:"avatar,omitempty"`
	Title        string   `json:"title,omitempty"`
	Bio          string   `json:"bio,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// PeersListFrame answers list_peers.
type PeersListFrame struct {
	Type  string `json:"type"`
	Peers []Peer `json:"peers"`
	ReqID string `json:"_reqId,omitempty"`
}

// SetStatusFrame sets the presence status: idle, working or dnd.
type SetStatusFrame struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

// SetSummaryFrame sets the one-line summary peers see.
type SetSummaryFrame struct {
	Type    string `json:"type"`
	Summary string `json:"summary"`
}

// SetVisibleFrame hides or shows the member in peer lists.
type SetVisibleFrame struct {
	Type    string `json:"type"`
	Visible bool   `json:"visible"`
	ReqID   string `json:"_reqId,omitempty"`
}

// SetProfileFrame changes the profile fields it carries.
type SetProfileFrame struct {
	Type         string    `json:"type"`
	Avatar       *string   `json:"avatar,omitempty"`
	Title        *string   `json:"title,omitempty"`
	Bio          *string   `json:"bio,omitempty"`
	Capabilities *[]string `json:"capabilities,omitempty"`
	ReqID        string    `json:"_reqId,omitempty"`
}

// ErrorFrame reports a rejected frame. ID or ReqID echo the request's.
type ErrorFrame struct {
	Type    string     `json:"type"`
	Code    string     `json:"code"`
	Message string     `json:"message"`
	ID      string     `json:"id,omitempty"`
	ReqID   string     `json:"_reqId,omitempty"`
	State   *StateInfo `json:"state,omitempty"` // state_conflict: the key as it is
}

// FeatureNegotiationRequestFrame names the features a client requires and
// would use (spec §15.3).
type FeatureNegotiationRequestFrame struct {
	Type     string   `json:"type"`
	Require  []string `json:"require"`
	Optional []string `json:"optional"`
}

// FeatureParams are one feature's parameters ("version" and the rest).
type FeatureParams map[string]any

// Feature is one advertised feature.
type Feature struct {
	Params FeatureParams `json:"params"`
}

// FeatureNegotiationResponseFrame advertises what the broker supports.
type FeatureNegotiationResponseFrame struct {
	Type            string             `json:"type"`
	Supported       map[string]Feature `json:"supported"`
	MissingRequired []string           `json:"missing_required"`
}

// CloseReason says why a negotiation failed (spec §15.3).
type CloseReason struct {
	Kind    string `json:"kind"` // feature_unavailable | feature_param_invalid | feature_param_below_floor
	Feature string `json:"feature"`
	Detail  string `json:"detail,omitempty"`
}

// FeatureNegotiationFailedFrame precedes a 4010 close.
type FeatureNegotiationFailedFrame struct {
	Type        string      `json:"type"`
	CloseReason CloseReason `json:"close_reason"`
}

// FrameError is a frame that cannot be accepted; Code is the error frame's.
type FrameError struct {
	Code    string
	Message string
}

func (e *FrameError) Error() string { return e.Code + ": " + e.Message }

// Error frame codes of the frame decoder.
const (
	FrameInvalidJSON   = "invalid_frame"
	FrameUnknownType   = "unknown_message_type"
	FrameMissingFields = "malformed"
)

// DecodeClientFrame decodes one frame a client sends to the broker into the
// pointer struct newClientFrame gives its type — the one list of the frame
// types the broker takes, each feature's requests from its own
// new<Feature>ClientFrame in <feature>_frames.go. A type not in it is a
// *FrameError with the code FrameUnknownType; every other failure is a
// *FrameError too.
func DecodeClientFrame(data []byte) (any, error) {
	typ, v, err := DecodeFrame(data, newClientFrame)
	if err == nil && v == nil {
		return nil, &FrameError{Code: FrameUnknownType, Message: fmt.Sprintf("unknown frame type %q", typ)}
	}
	return v, err
}

func newClientFrame(typ string) any {
	switch typ {
	case TypeHello:
		return new(HelloFrame)
	case TypeSessionHello:
		return new(SessionHelloFrame)
	case TypeSend:
		return new(SendFrame)
	case TypeClientAck:
		return new(ClientAckFrame)
	case TypeListPeers:
		return new(ListPeersFrame)
	case TypeSetStatus:
		return new(SetStatusFrame)
	case TypeSetSummary:
		return new(SetSummaryFrame)
	case TypeSetVisible:
		return new(SetVisibleFrame)
	case TypeSetProfile:
		return new(SetProfileFrame)
	case TypeFeatureNegotiationRequest:
		return new(FeatureNegotiationRequestFrame)
	case TypeSetState, TypeGetState, TypeListState:
		return newStateClientFrame(typ)
	case TypeListSkills, TypeGetSkill, TypePublishSkill, TypeRemoveSkill:
		return newSkillClientFrame(typ)
	case TypeRemember, TypeRecall, TypeForget:
		return newMemoryClientFrame(typ)
	case TypeLockAcquire, TypeLockRenew, TypeLockRelease, TypeListLocks:
		return newLockClientFrame(typ)
	case TypeListNodes:
		return new(ListNodesFrame)
	case TypeDrainHeld:
		return new(DrainHeldFrame)
	case TypeReserve, TypeReservationRenew, TypeReservationRelease, TypeListReservations, TypeReservationCheck:
		return newReservationClientFrame(typ)
	}
	return newTopicClientFrame(typ)
}

// DecodeFrame reads the "type" of a frame, asks newFrame for a pointer to
// the struct of that type and decodes the frame into it. When newFrame
// answers nil the type is unknown: DecodeFrame returns it with a nil frame
// and no error, for the caller to refuse or pass on. Failures are
// *FrameError.
func DecodeFrame(data []byte, newFrame func(typ string) any) (string, any, error) {
	// Fast path, one parse: frames put "type" first (ours, the upstream
	// broker's and CLI's). Anything it cannot vouch for — another shape, a
	// decoding error, a second key decoding into Type — takes the path
	// below, which decides every answer.
	if typ, ok := leadingType(data); ok {
		if v, ok := newFrame(typ).(flatFrame); ok && v.decodeFlat(data) && typeField(v) == typ {
			return typ, v, nil // a flat push or ack: no reflection at all
		}
		if v := newFrame(typ); v != nil && json.Unmarshal(data, v) == nil && typeField(v) == typ {
			return typ, v, nil
		}
	}
	return decodeProbed(data, newFrame)
}

// decodeProbed is DecodeFrame in two parses: the type first, then the frame.
func decodeProbed(data []byte, newFrame func(typ string) any) (string, any, error) {
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return "", nil, &FrameError{Code: FrameInvalidJSON, Message: "frame is not a JSON object: " + err.Error()}
	}
	if head.Type == nil {
		return "", nil, &FrameError{Code: FrameInvalidJSON, Message: "frame has no string \"type\""}
	}
	v := newFrame(*head.Type)
	if v == nil {
		return *head.Type, nil, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return *head.Type, nil, &FrameError{Code: FrameInvalidJSON, Message: fmt.Sprintf("%s frame: %v", *head.Type, err)}
	}
	return *head.Type, v, nil
}

// leadingType reads the type of a frame that opens with {"type":"<name>",
// the name made of lower-case letters, digits and underscores.
func leadingType(data []byte) (string, bool) {
	const prefix = `{"type":"`
	if !bytes.HasPrefix(data, []byte(prefix)) {
		return "", false
	}
	rest := data[len(prefix):]
	for i, c := range rest {
		switch {
		case c == '"':
			return string(rest[:i]), i > 0
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		default:
			return "", false
		}
	}
	return "", false
}

// typeField is the Type field of the frame struct v points to ("" if it
// has none).
func typeField(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return ""
	}
	if f := rv.FieldByName("Type"); f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}
