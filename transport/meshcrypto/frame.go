package meshcrypto

import (
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
		return nil, fmt.Errorf("cannot encrypt to %s: %w", s.Destination.TargetSpec, err)
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
			return nil, fmt.Errorf("cannot encrypt to %s: %w", s.Destination.TargetSpec, err)
		}
	}
	if f.Meta, err = messages.FrameMeta(s.Meta, env); err != nil {
		return nil, err
	}
	return f, nil
}

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
