package messages

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// FrameMaker builds the frame of a validated send (meshcrypto's
// Identity.SendFrame: the body and header sealed for a DM).
type FrameMaker func(s *Send, clientMessageID string, fp Fingerprint) (*SendFrame, error)

// NewAccept is the accept command of a validated send from mesh (a
// membership or a session's route): its fingerprint scoped to that sender,
// and the frame every attempt will send.
func NewAccept(mesh string, s *Send, clientMessageID, rowID string, now int64, frame FrameMaker) (*AcceptSend, error) {
	spec := s.Fingerprint()
	fp := spec.Scoped(mesh)
	f, err := frame(s, clientMessageID, fp)
	if err != nil {
		return nil, err
	}
	payload, err := f.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode send frame: %w", err)
	}
	return &AcceptSend{Mesh: mesh, ClientMessageID: clientMessageID, RowID: rowID, Fingerprint: fp, SpecFingerprint: spec,
		Payload: payload, Now: now, Mail: s.Header()}, nil
}

// ReceiptPriority is a receipt's priority: "now", which the broker pushes
// whatever its recipient's status. At the default ("next") a receipt to a
// working agent — every agent, during its turn, once its hooks report it —
// waited for the turn's end, and its acked_by, list_awaiting_acks and
// `inbox awaiting-ack` said "not acknowledged" meanwhile.
const ReceiptPriority = "now"

// ReceiptSend is the receipt r (Receipt, ReceiptFor and, for its kind,
// Until or Reason) to sender, the key that sent the message: a DM whose
// text says what happened in words, for an upstream peer that reads only
// the text, with its client_message_id. The id is derived from what the
// receipt says and to whom (ReceiptID), so that the same receipt sent
// again — an acknowledgement repeated, a message pushed again — is the
// same request, which the outbox answers as a duplicate.
func ReceiptSend(r Mail, sender, subject string) (*Send, string) {
	var text string
	switch r.Receipt {
	case ReceiptAck:
		text = "Acknowledged: message " + r.ReceiptFor
		if subject != "" {
			text = "Acknowledged: " + subject + " (message " + r.ReceiptFor + ")"
		}
	case ReceiptHeld:
		text = "Your message " + r.ReceiptFor + " is held: this recipient takes direct messages from its contacts only. " +
			"It is a contact request until " + r.Until + "; if it is accepted, the message is delivered."
	case ReceiptAccepted:
		text = "Your contact request was accepted: message " + r.ReceiptFor + " was delivered."
	default:
		text = "Your message " + r.ReceiptFor + " was refused: " + r.Reason + "."
	}
	m := r
	return &Send{Destination: Destination{Kind: KindDM, Ref: sender, TargetSpec: sender}, Priority: ReceiptPriority,
		Body: []byte(text), Mail: &m}, ReceiptID(&r, sender)
}

// ReceiptID is the client_message_id of receipt r to sender:
// "rcpt-<kind>-" and 32 hex digits of SHA-256 over the sender, the id the
// receipt is for and its reason.
func ReceiptID(r *Mail, sender string) string {
	h := sha256.Sum256([]byte(sender + "\x00" + r.ReceiptFor + "\x00" + r.Reason))
	return "rcpt-" + r.Receipt + "-" + hex.EncodeToString(h[:16])
}

// Reasons of a refused receipt.
const (
	ReasonBlockAll       = "this recipient takes no direct messages"
	ReasonRequestRefused = "the recipient refused your contact request"
	ReasonRequestExpired = "your contact request expired unanswered"
)
