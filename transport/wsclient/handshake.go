package wsclient

import (
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/claudemesh/claudemesh-go/messages"
)

// handshake is the start of a new connection: hello (or session_hello),
// its answer, and the feature negotiation (negotiate.go), frame by frame
// before the connection's reader and writer start.
type handshake struct {
	cfg     *Config
	ws      *websocket.Conn
	pending []any // frames received before the handshake ended, in order
}

func (h *handshake) write(v any) error {
	h.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	return h.ws.WriteJSON(v)
}

// read returns the next decoded frame; undecodable frames are logged and
// skipped (the upstream broker's own rule).
func (h *handshake) read() (any, error) {
	for {
		_, data, err := h.ws.ReadMessage()
		if err != nil {
			return nil, err
		}
		f, err := DecodeBrokerFrame(data)
		if err != nil {
			h.cfg.Log.Warn("undecodable broker frame", "err", err)
			continue
		}
		return f, nil
	}
}

func (h *handshake) run() (*Session, error) {
	cfg := h.cfg
	if err := h.write(h.hello()); err != nil {
		return nil, fmt.Errorf("wsclient: send hello: %w", err)
	}
	h.ws.SetReadDeadline(time.Now().Add(cfg.HelloTimeout))
	var ack *messages.HelloAckFrame
	for ack == nil {
		f, err := h.read()
		if err != nil {
			if isTimeout(err) {
				h.closeWith(websocket.ClosePolicyViolation, "hello_ack timeout")
				return nil, fmt.Errorf("%w (%s)", ErrHelloTimeout, cfg.HelloTimeout)
			}
			return nil, fmt.Errorf("wsclient: waiting for hello_ack: %w", closeErr(err, false))
		}
		switch f := f.(type) {
		case *messages.HelloAckFrame:
			ack = f
		case *messages.ErrorFrame:
			return nil, h.rejected(f)
		default:
			h.pending = append(h.pending, f)
		}
	}
	if cfg.Legacy {
		return &Session{PresenceID: ack.PresenceID, MemberDisplayName: ack.MemberDisplayName, Legacy: true,
			MaxPayloadBytes: DefaultMaxPayloadBytes}, nil
	}
	sess, err := h.negotiate()
	if err != nil {
		return nil, err
	}
	sess.PresenceID, sess.MemberDisplayName = ack.PresenceID, ack.MemberDisplayName
	return sess, nil
}

// rejected reads on to the broker's close after a hello error frame.
func (h *handshake) rejected(f *messages.ErrorFrame) error {
	he := &HelloError{Code: f.Code, Message: f.Message}
	h.ws.SetReadDeadline(time.Now().Add(closeWait))
	for {
		if _, _, err := h.ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				he.CloseCode, he.Close = ce.Code, ce.Text
			}
			return he
		}
	}
}

func (h *handshake) negotiate() (*Session, error) {
	cfg := h.cfg
	req := &messages.FeatureNegotiationRequestFrame{Type: messages.TypeFeatureNegotiationRequest,
		Require: Required, Optional: Optional}
	if err := h.write(req); err != nil {
		return nil, fmt.Errorf("wsclient: send feature_negotiation_request: %w", err)
	}
	h.ws.SetReadDeadline(time.Now().Add(cfg.NegotiateTimeout))
	for {
		f, err := h.read()
		if err != nil {
			if isTimeout(err) {
				return nil, h.fail(nil, messages.CloseReason{Kind: KindUnavailable, Feature: FeatureDedupe,
					Detail: fmt.Sprintf("the broker did not answer feature_negotiation_request within %s", cfg.NegotiateTimeout)})
			}
			return nil, fmt.Errorf("wsclient: waiting for feature_negotiation_response: %w", closeErr(err, false))
		}
		switch f := f.(type) {
		case *messages.FeatureNegotiationResponseFrame:
			cfg.Log.Debug("feature negotiation response", "response", f)
			sess, reason := Validate(f)
			if reason != nil {
				return nil, h.fail(f, *reason)
			}
			for _, w := range sess.Warnings {
				cfg.Log.Warn("feature_optional_param_invalid", "detail", w)
			}
			cfg.Log.Info("features negotiated", "features", sess.Features, "dedupe_mode", sess.DedupeMode,
				"dedupe_retention_days", sess.DedupeRetentionDays, "max_payload", sess.MaxPayloadBytes)
			return sess, nil
		case *messages.FeatureNegotiationFailedFrame:
			// The broker refused our requirements first (it closes 4010).
			return nil, h.fail(nil, f.CloseReason)
		case *messages.ErrorFrame:
			if f.Code == messages.FrameUnknownType && f.ID == "" && f.ReqID == "" {
				return nil, h.fail(nil, messages.CloseReason{Kind: KindUnavailable, Feature: FeatureDedupe,
					Detail: "the broker does not know feature_negotiation_request"})
			}
			h.pending = append(h.pending, f)
		default:
			h.pending = append(h.pending, f)
		}
	}
}

// fail sends feature_negotiation_failed and the 4010 close, and returns the
// NegotiationError.
func (h *handshake) fail(resp *messages.FeatureNegotiationResponseFrame, reason messages.CloseReason) error {
	if len(reason.Detail) > 500 {
		reason.Detail = reason.Detail[:500]
	}
	h.cfg.Log.Warn("feature negotiation failed", "kind", reason.Kind, "feature", reason.Feature,
		"detail", reason.Detail, "response", resp)
	h.write(&messages.FeatureNegotiationFailedFrame{Type: messages.TypeFeatureNegotiationFailed, CloseReason: reason})
	h.closeWith(CloseFeatureUnavailable, CompactReason(reason))
	return &NegotiationError{Reason: reason, Response: resp}
}

// closeWith sends a close frame and waits (briefly) for the broker's.
func (h *handshake) closeWith(code int, reason string) {
	h.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(writeTimeout))
	h.ws.SetReadDeadline(time.Now().Add(closeWait))
	for {
		if _, _, err := h.ws.ReadMessage(); err != nil {
			return
		}
	}
}
