package wsclient

import (
	"encoding/json"
	"fmt"

	"github.com/claudemesh/claudemesh-go/messages"
)

// UnknownFrame is a broker frame of a type this package does not decode
// (the upstream broker sends replies such as state_result that the daemon
// may not use yet). Data is the frame as received.
type UnknownFrame struct {
	Type string
	Data json.RawMessage
}

// DecodeBrokerFrame decodes one frame the broker sends to a client into its
// pointer struct: *messages.HelloAckFrame, *messages.AckFrame,
// *messages.PushFrame, *messages.PeersListFrame, *messages.ErrorFrame,
// *messages.FeatureNegotiationResponseFrame,
// *messages.FeatureNegotiationFailedFrame, or *UnknownFrame for any other
// type. It mirrors messages.DecodeClientFrame; failures are
// *messages.FrameError.
func DecodeBrokerFrame(data []byte) (any, error) {
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, &messages.FrameError{Code: messages.FrameInvalidJSON, Message: "frame is not a JSON object: " + err.Error()}
	}
	if head.Type == nil {
		return nil, &messages.FrameError{Code: messages.FrameInvalidJSON, Message: "frame has no string \"type\""}
	}
	var v any
	switch *head.Type {
	case messages.TypeHelloAck:
		v = new(messages.HelloAckFrame)
	case messages.TypeAck:
		v = new(messages.AckFrame)
	case messages.TypePush:
		v = new(messages.PushFrame)
	case messages.TypePeersList:
		v = new(messages.PeersListFrame)
	case messages.TypeError:
		v = new(messages.ErrorFrame)
	case messages.TypeFeatureNegotiationResponse:
		v = new(messages.FeatureNegotiationResponseFrame)
	case messages.TypeFeatureNegotiationFailed:
		v = new(messages.FeatureNegotiationFailedFrame)
	default:
		return &UnknownFrame{Type: *head.Type, Data: append(json.RawMessage(nil), data...)}, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, &messages.FrameError{Code: messages.FrameInvalidJSON, Message: fmt.Sprintf("%s frame: %v", *head.Type, err)}
	}
	return v, nil
}
