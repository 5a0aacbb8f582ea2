package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Limits of a send request (phase A). The body limit of the IPC server
// (1 MiB) applies first; these bound the fields inside it. MaxMessageBytes
// keeps the encrypted frame under the upstream broker's 64 KiB frame limit.
const (
	MaxMessageBytes  = 32 << 10
	MaxMetaBytes     = 16 << 10
	MaxIDLength      = 128
	maxNameLength    = 64
	pubkeyHexLength  = 64
	DefaultPriority  = "next"
	envelopeVersion1 = "1"
)

// Destination kinds of the request fingerprint (spec §4.3).
const (
	KindDM    = "dm"
	KindTopic = "topic"
)

// SendRequest is the body of POST /v1/send. Message is a pointer so that an
// absent field and an empty one are told apart.
type SendRequest struct {
	To              string          `json:"to"`
	Message         *string         `json:"message"`
	Priority        string          `json:"priority,omitempty"`
	Meta            json.RawMessage `json:"meta,omitempty"`
	ReplyToID       string          `json:"reply_to_id,omitempty"`
	ReplyToIDCompat string          `json:"replyToId,omitempty"`
	ClientMessageID string          `json:"client_message_id,omitempty"`
	Mesh            string          `json:"mesh,omitempty"`
}

// Destination is a validated `to`: the fingerprint's kind and ref, and the
// broker's targetSpec.
//
//	64 hex      → dm,    ref = lowercase pubkey, targetSpec = ref
//	#name       → topic, ref = "name",           targetSpec = "#name"
//	@name       → topic, ref = "@name",          targetSpec = "@name"
//	*           → topic, ref = "*",              targetSpec = "*"
//
// Groups and broadcast keep their sigil in the ref so that `#x` and `@x`
// never share a fingerprint. Display names are not accepted here: the
// fingerprint must cover the resolved key, so `claudemesh send` resolves a
// name through the peer list before it calls the daemon.
type Destination struct {
	Kind       string
	Ref        string
	TargetSpec string
}

// Send is a send request that passed phase A validation. Meta is the RFC 8785
// form of the request's meta object, nil when meta was absent, null or {}.
type Send struct {
	Mesh            string // "" when the request named none
	ClientMessageID string // "" when neither header nor body gave one
	Destination     Destination
	Priority        string
	Meta            []byte
	ReplyToID       string
	Body            []byte
}

// DecodeSend parses and validates a POST /v1/send body. idempotencyKey is the
// Idempotency-Key header and hasKey whether the header was present: the
// header wins over the body field, and both present but different is an error.
// Every failure is an *Error with status 400 or 413.
func DecodeSend(body []byte, idempotencyKey string, hasKey bool) (*Send, error) {
	var req SendRequest
	if !decodeFlat(body, &req, sendRequestFields) {
		req = SendRequest{}
		if err := decodeStrict(body, &req); err != nil {
			return nil, err
		}
	}
	s, err := req.Validate()
	if err != nil {
		return nil, err
	}
	if hasKey {
		if err := checkID(idempotencyKey, "Idempotency-Key"); err != nil {
			return nil, err
		}
		if s.ClientMessageID != "" && s.ClientMessageID != idempotencyKey {
			return nil, badRequest(CodeIdempotencyKeyDiffer,
				"Idempotency-Key header %q and client_message_id %q differ", idempotencyKey, s.ClientMessageID)
		}
		s.ClientMessageID = idempotencyKey
	}
	return s, nil
}

// DecodeJSON decodes an IPC request body the way DecodeSend does: one JSON
// object, no unknown fields, valid UTF-8. Failures are 400 *Error values.
func DecodeJSON(body []byte, v any) error { return decodeStrict(body, v) }

// decodeStrict decodes one JSON object with no unknown fields and nothing
// after it. The body must be valid UTF-8: encoding/json would otherwise
// replace invalid bytes silently and two different requests could share a
// fingerprint.
func decodeStrict(body []byte, v any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return badRequest(CodeInvalidJSON, "request body must be a JSON object")
	}
	if !utf8.Valid(body) {
		return badRequest(CodeInvalidJSON, "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return badRequest(CodeUnknownField, "unknown field %s", name)
		}
		return badRequest(CodeInvalidJSON, "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest(CodeInvalidJSON, "unexpected data after the JSON object")
	}
	return nil
}

// Validate checks every field of the request and returns its canonical form.
func (r *SendRequest) Validate() (*Send, error) {
	s := &Send{Mesh: r.Mesh, ClientMessageID: r.ClientMessageID, Priority: r.Priority}
	if r.ClientMessageID != "" {
		if err := checkID(r.ClientMessageID, "client_message_id"); err != nil {
			return nil, err
		}
	}
	var err error
	if s.Destination, err = ParseDestination(r.To); err != nil {
		return nil, err
	}
	if r.Message == nil || *r.Message == "" {
		return nil, badRequest(CodeMissingMessage, "message is required and must not be empty")
	}
	if len(*r.Message) > MaxMessageBytes {
		return nil, &Error{Status: 413, Code: CodeMessageTooLarge,
			Detail: "message exceeds " + strconv.Itoa(MaxMessageBytes) + " bytes"}
	}
	s.Body = []byte(*r.Message)
	switch s.Priority {
	case "":
		s.Priority = DefaultPriority
	case "now", "next", "low":
	default:
		return nil, badRequest(CodeInvalidPriority, "priority must be now, next or low, not %q", r.Priority)
	}
	if s.Meta, err = CanonicalMeta(r.Meta); err != nil {
		return nil, err
	}
	if s.ReplyToID, err = replyTo(r.ReplyToID, r.ReplyToIDCompat); err != nil {
		return nil, err
	}
	return s, nil
}

// ParseDestination validates `to` (see Destination).
func ParseDestination(to string) (Destination, error) {
	switch {
	case to == "":
		return Destination{}, badRequest(CodeMissingTo, "to is required")
	case to == "*":
		return Destination{Kind: KindTopic, Ref: "*", TargetSpec: "*"}, nil
	case to[0] == '#' && validName(to[1:]):
		return Destination{Kind: KindTopic, Ref: to[1:], TargetSpec: to}, nil
	case to[0] == '@' && validName(to[1:]):
		return Destination{Kind: KindTopic, Ref: to, TargetSpec: to}, nil
	case len(to) == pubkeyHexLength && IsHex(to):
		ref := strings.ToLower(to)
		return Destination{Kind: KindDM, Ref: ref, TargetSpec: ref}, nil
	}
	return Destination{}, badRequest(CodeInvalidTo,
		"to must be a 64-hex pubkey, #topic, @group or *, got %q (display names are resolved by `claudemesh send`)", to)
}

// CanonicalMeta validates meta as a JSON object and returns its RFC 8785
// form; absent, null and {} all give nil (the fingerprint's empty meta).
func CanonicalMeta(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, badRequest(CodeInvalidMeta, "meta must be a JSON object")
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, badRequest(CodeInvalidMeta, "meta is not canonicalizable JSON: %v", err)
	}
	if len(canon) > MaxMetaBytes {
		return nil, badRequest(CodeInvalidMeta, "meta exceeds %d bytes in canonical form", MaxMetaBytes)
	}
	if bytes.Equal(canon, []byte("{}")) {
		return nil, nil
	}
	return canon, nil
}

func replyTo(snake, camel string) (string, error) {
	if snake != "" && camel != "" && snake != camel {
		return "", badRequest(CodeInvalidReplyTo, "reply_to_id and replyToId differ")
	}
	id := snake
	if id == "" {
		id = camel
	}
	if id == "" {
		return "", nil
	}
	if !validID(id) {
		return "", badRequest(CodeInvalidReplyTo, "reply_to_id must be 1-%d printable ASCII characters", MaxIDLength)
	}
	return id, nil
}

func checkID(id, field string) error {
	if !validID(id) {
		return badRequest(CodeInvalidClientID, "%s must be 1-%d printable ASCII characters without spaces", field, MaxIDLength)
	}
	return nil
}

// ValidClientMessageID reports whether id is usable as a client_message_id:
// 1–128 printable ASCII characters, no spaces.
func ValidClientMessageID(id string) bool { return validID(id) }

func validID(id string) bool {
	if len(id) == 0 || len(id) > MaxIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func validName(name string) bool {
	if len(name) == 0 || len(name) > maxNameLength {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '.' || c == '/'
		if !ok {
			return false
		}
	}
	return true
}

// IsHex reports whether s is a non-empty string of hex digits.
func IsHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}
