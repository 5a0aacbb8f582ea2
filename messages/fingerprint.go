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
// once, at accept, and stored frozen with the outbox row.
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
	in = append(append(append(in, s.Meta...), 0), bodyHex[:]...)
	return sha256.Sum256(in)
}
