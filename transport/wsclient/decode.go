package wsclient

import (
	"encoding/json"

	"github.com/claudemesh/claudemesh-go/messages"
)

// UnknownFrame is a broker frame of a type this package does not decode
// (the upstream broker sends replies such as state_result that the daemon
// may not use yet). Data is the frame as received.
type UnknownFrame struct {
	Type string
	Data json.RawMessage
}

// DecodeBrokerFrame decodes one frame the broker sends to a client into the
// pointer struct newBrokerFrame gives its type — the one list of the frame
// types a client takes, each feature's answers from its own
// messages.New<Feature>BrokerFrame — or *UnknownFrame for any other type.
// Failures are *messages.FrameError.
func DecodeBrokerFrame(data []byte) (any, error) {
	typ, v, err := messages.DecodeFrame(data, newBrokerFrame)
	if err == nil && v == nil {
		return &UnknownFrame{Type: typ, Data: append(json.RawMessage(nil), data...)}, nil
	}
	return v, err
}

func newBrokerFrame(typ string) any {
	switch typ {
	case messages.TypeHelloAck:
		return new(messages.HelloAckFrame)
	case messages.TypeAck:
		return new(messages.AckFrame)
	case messages.TypePush:
		return new(messages.PushFrame)
	case messages.TypePeersList:
		return new(messages.PeersListFrame)
	case messages.TypeError:
		return new(messages.ErrorFrame)
	case messages.TypeFeatureNegotiationResponse:
		return new(messages.FeatureNegotiationResponseFrame)
	case messages.TypeFeatureNegotiationFailed:
		return new(messages.FeatureNegotiationFailedFrame)
	case messages.TypeStateResult, messages.TypeStateList, messages.TypeStateChange, messages.TypeStateSet:
		return messages.NewStateBrokerFrame(typ)
	case messages.TypeSkillList, messages.TypeSkillData, messages.TypeSkillPublished, messages.TypeSkillRemoved:
		return messages.NewSkillBrokerFrame(typ)
	case messages.TypeMemoryStored, messages.TypeMemoryResults:
		return messages.NewMemoryBrokerFrame(typ)
	case messages.TypeLockResult, messages.TypeLockReleased, messages.TypeLockList:
		return messages.NewLockBrokerFrame(typ)
	case messages.TypeNodeList:
		return messages.NewNodeBrokerFrame(typ)
	case messages.TypeHeldDrained:
		return messages.NewHeldBrokerFrame(typ)
	case messages.TypeReservationResult, messages.TypeReservationReleased, messages.TypeReservationList,
		messages.TypeReservationCheckResult:
		return messages.NewReservationBrokerFrame(typ)
	}
	return messages.NewTopicBrokerFrame(typ)
}
