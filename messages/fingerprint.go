package messages

import (
	"crypto/sha256"
	"encoding/hex"
)

// Fingerprint is the request_fingerprint of spec §4.3: SHA-256 over
//
//	envelope_version 0x00 destination_kind 0x00 destination_ref 0x00
//	reply_to_id 0x00 priority 0x00 meta_canonical_json 0x00 body_hash
//
// where body_hash is the lowercase hex SHA-256 of the body. It is computed
// once, at accept, and stored frozen with the outbox row. A send with a
// mail header has it in its meta, under MailMetaKey, as requested (but
// reply_to_id, a part of its own).
type Fingerprint [32]byte

// Hex is the full fingerprint as 64 lowercase hex characters.
func (f Fingerprint) Hex() string { return hex.EncodeToString(f[:]) }

// Prefix is the first 8 bytes as 16 lowercase hex characters, the form 409
// bodies carry.
func (f Fingerprint) Prefix() string { return hex.EncodeToString(f[:8]) }

// Fingerprint computes the request fingerprint of a validated send.
func (s *Send) Fingerprint() Fingerprint {
	bodyHash := sha256.Sum256(s.Body)
	var bodyHex [64]byte
	hex.Encode(bodyHex[:], bodyHash[:])

	var buf [512]byte // the whole input, on the stack unless meta is large
	in := buf[:0]
	for _, part := range [...]string{envelopeVersion1, s.Destination.Kind, s.Destination.Ref, s.ReplyToID, s.Priority} {
		in = append(append(in, part...), 0)
	}
	meta := s.Meta
	if s.Mail != nil {
		// reply_to_id is a part of its own: a reply with no other mail
		// field is the request it was before mail headers.
		m := *s.Mail
		if m.ReplyToID = ""; m != (Mail{}) {
			meta = fingerprintMeta(meta, &m)
		}
	}
	in = append(append(append(in, meta...), 0), bodyHex[:]...)
	return sha256.Sum256(in)
}

// Fingerprint versions, recorded with each outbox row (its
// fingerprint_version column, outbox migration 0006).
const (
	// FingerprintSpec is spec §4.3's form alone: the rows written before
	// migration 0006, when a client_message_id was unique daemon-wide.
	FingerprintSpec = 1
	// FingerprintScoped is Scoped's form, which covers the sender: every
	// row written since.
	FingerprintScoped = 2
)

// Scoped is the request fingerprint of f sent by sender — the outbox row's
// mesh: a membership's slug, or a session's route "<mesh>/<session id>":
//
//	SHA-256( "2" 0x00 sender 0x00 f )
//
// with f's 32 raw bytes. A client_message_id is the sender's own (the
// outbox is unique per mesh and id), and the fingerprint says so too: a
// row can never match another sender's request, and a broker whose dedupe
// is keyed by mesh and id alone answers two senders' requests under one id
// with a conflict rather than taking the second for a repeat of the first.
// It is what the outbox stores and what the send frame carries; the
// broker compares it byte for byte and never recomputes it. Neither a slug
// nor a route contains 0x00.
func (f Fingerprint) Scoped(sender string) Fingerprint {
	var buf [256]byte
	in := append(append(append(buf[:0], "2\x00"...), sender...), 0)
	return sha256.Sum256(append(in, f[:]...))
}
