package messages

import (
	"encoding/json"
	"fmt"
)

// SendFrame is the broker `send` frame (wire protocol §2.2). The daemon
// builds it once, at accept, and stores its JSON as the outbox payload: every
// attempt sends exactly these bytes, so the nonce and ciphertext of a DM
// never change between retries. Meta is an extension our broker carries; the
// upstream broker ignores it.
type SendFrame struct {
	Type               string          `json:"type"`
	ID                 string          `json:"id"`
	ClientMessageID    string          `json:"client_message_id"`
	RequestFingerprint string          `json:"request_fingerprint"`
	TargetSpec         string          `json:"targetSpec"`
	Priority           string          `json:"priority"`
	Nonce              string          `json:"nonce"`
	Ciphertext         string          `json:"ciphertext"`
	ReplyToID          string          `json:"replyToId,omitempty"`
	Meta               json.RawMessage `json:"meta,omitempty"`
	// FirstSend says this is the id's first attempt: its sender never put
	// it on a wire before, so the broker may skip the B0 dedupe read (the
	// accept transaction still decides duplicates). Sent only to a broker
	// that advertises client_message_id_dedupe's first_send; never stored
	// (the dispatcher adds it to the first attempt's bytes: WithFirstSend).
	FirstSend bool `json:"first_send,omitempty"`
}

// NewSendFrame builds the frame of a validated send whose body was already
// sealed (DM) or encoded (everything else) into nonce and ciphertext.
func NewSendFrame(s *Send, clientMessageID string, fp Fingerprint, nonce, ciphertext string) *SendFrame {
	return &SendFrame{
		Type:               "send",
		ID:                 clientMessageID,
		ClientMessageID:    clientMessageID,
		RequestFingerprint: fp.Hex(),
		TargetSpec:         s.Destination.TargetSpec,
		Priority:           s.Priority,
		Nonce:              nonce,
		Ciphertext:         ciphertext,
		ReplyToID:          s.ReplyToID,
		Meta:               s.Meta,
	}
}

// Marshal is the frame's JSON, byte for byte what json.Marshal makes of it
// (FuzzSendFrameMarshal), without reflection for a frame with no meta.
func (f *SendFrame) Marshal() ([]byte, error) {
	if len(f.Meta) > 0 {
		return json.Marshal(f) // json.Marshal compacts and escapes raw meta
	}
	b := make([]byte, 0, 160+len(f.ID)+len(f.ClientMessageID)+len(f.TargetSpec)+len(f.Nonce)+len(f.Ciphertext)+
		len(f.ReplyToID))
	b = AppendJSONString(append(b, `{"type":`...), f.Type, true)
	b = AppendJSONString(append(b, `,"id":`...), f.ID, true)
	b = AppendJSONString(append(b, `,"client_message_id":`...), f.ClientMessageID, true)
	b = AppendJSONString(append(b, `,"request_fingerprint":`...), f.RequestFingerprint, true)
	b = AppendJSONString(append(b, `,"targetSpec":`...), f.TargetSpec, true)
	b = AppendJSONString(append(b, `,"priority":`...), f.Priority, true)
	b = AppendJSONString(append(b, `,"nonce":`...), f.Nonce, true)
	b = AppendJSONString(append(b, `,"ciphertext":`...), f.Ciphertext, true)
	if f.ReplyToID != "" {
		b = AppendJSONString(append(b, `,"replyToId":`...), f.ReplyToID, true)
	}
	if f.FirstSend {
		b = append(b, firstSendMember...)
	}
	return append(b, '}'), nil
}

// firstSendMember is SendFrame.FirstSend set, as JSON.
const firstSendMember = `,"first_send":true`

// WithFirstSend returns a stored send frame (a JSON object, as Marshal
// makes it) with first_send set, in a new slice; payload is unchanged.
func WithFirstSend(payload []byte) []byte {
	end := len(payload) - 1
	if end < 1 || payload[end] != '}' {
		return payload
	}
	out := make([]byte, 0, len(payload)+len(firstSendMember))
	out = append(append(out, payload[:end]...), firstSendMember...)
	return append(out, '}')
}

// ReassignFrame returns a stored payload with its id fields set to a new
// client_message_id, everything else (ciphertext, nonce, fingerprint)
// unchanged: what `outbox requeue` stores for the successor row.
func ReassignFrame(payload []byte, clientMessageID string) ([]byte, error) {
	var f SendFrame
	if err := json.Unmarshal(payload, &f); err != nil {
		return nil, fmt.Errorf("stored payload is not a send frame: %w", err)
	}
	f.ID, f.ClientMessageID = clientMessageID, clientMessageID
	return json.Marshal(&f)
}
