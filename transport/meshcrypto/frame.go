package meshcrypto

import (
	"errors"
	"fmt"

	"github.com/claudemesh/claudemesh-go/messages"
)

// SendFrame builds the broker frame of a validated send from id: a DM's
// body, and its mail header, sealed to the recipient each under a nonce
// of its own; any other body, and its header, plain. The header rides in
// the frame's meta (messages.MailEnvelope).
func (id *Identity) SendFrame(s *messages.Send, clientMessageID string, fp messages.Fingerprint) (*messages.SendFrame, error) {
	dm := s.Destination.Kind == messages.KindDM
	var nonce, ciphertext string
	var err error
	if dm {
		nonce, ciphertext, err = id.SealDM(s.Destination.TargetSpec, s.Body)
	} else {
		nonce, ciphertext, err = EncodePlain(s.Body)
	}
	if err != nil {
		return nil, sealError(s.Destination.TargetSpec, err)
	}
	f := messages.NewSendFrame(s, clientMessageID, fp, nonce, ciphertext)
	h := s.Header()
	if h == nil {
		return f, nil
	}
	env := &messages.MailEnvelope{V: 1, Header: h}
	if dm {
		env.Header = nil
		if env.Nonce, env.Box, err = id.SealDM(s.Destination.TargetSpec, h.JSON()); err != nil {
			return nil, sealError(s.Destination.TargetSpec, err)
		}
	}
	if f.Meta, err = messages.FrameMeta(s.Meta, env); err != nil {
		return nil, err
	}
	return f, nil
}

// sealError is why a DM to to could not be sealed, in a sender's words: a
// recipient key that is no member's (it wraps ErrBadPublicKey) says so,
// without this package's.
func sealError(to string, err error) error {
	if errors.Is(err, ErrBadPublicKey) {
		return &recipientKeyError{to: to, err: err}
	}
	return fmt.Errorf("cannot encrypt to %s: %w", to, err)
}

// recipientKeyError is a DM's recipient that is 64 hex characters but no
// ed25519 public key a member can have (not a point of the curve, or a
// weak one), so that nothing can be encrypted to it.
type recipientKeyError struct {
	to  string
	err error
}

func (e *recipientKeyError) Error() string {
	return fmt.Sprintf("%s is not a member's public key (64 hex characters, but no key a member can have): "+
		"nothing can be encrypted to it; check it against the peer list (claudemesh peers)", e.to)
}

func (e *recipientKeyError) Unwrap() error { return e.err }

// OpenMail reads the mail header of a pushed message from sender: env's
// sealed header opened with id, or its plain one. Errors wrap
// messages.ErrMailEnvelope, or the errors of OpenDM.
func (id *Identity) OpenMail(senderPubHex string, env *messages.MailEnvelope) (*messages.Mail, error) {
	if env.Header != nil {
		return messages.ParseMail(env.Header.JSON())
	}
	plain, err := id.OpenDM(senderPubHex, env.Nonce, env.Box)
	if err != nil {
		return nil, err
	}
	return messages.ParseMail(plain)
}
