package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Limits of a send request (phase A). The body limit of the IPC server
// (1 MiB) applies first; these bound the fields inside it. Together they
// keep the send frame under MaxFrameBytes: a message of 32 KiB is 43,712
// bytes of base64 once sealed, meta is bounded as the frame carries it
// (TestSendFrameWithinBrokerLimit).
const (
	MaxMessageBytes  = 32 << 10
	MaxMetaBytes     = 16 << 10
	MaxIDLength      = 128
	maxNameLength    = 64
	pubkeyHexLength  = 64
	DefaultPriority  = "next"
	envelopeVersion1 = "1"
)

// MaxFrameBytes is the largest frame the upstream broker takes (its
// maxPayload, 64 KiB); it closes the connection with 1009 on a larger one.
// No IPC request can make the daemon send a frame larger than this: the
// limits of every field a frame carries keep it under, however its JSON
// escapes them.
const MaxFrameBytes = 64 << 10

// Codes of a body whose JSON text is refused before its fields are read.
const (
	CodeDuplicateKey   = "duplicate_key"
	CodeInvalidUnicode = "invalid_unicode"
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
	// The mail header (mail.go): all optional.
	Subject     string `json:"subject,omitempty"`
	ThreadID    string `json:"thread_id,omitempty"`
	Importance  string `json:"importance,omitempty"`
	AckRequired bool   `json:"ack_required,omitempty"`
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
// never share a fingerprint. Anything else with something visible in it
// (at most MaxPeerNameBytes) names a peer — a display name or a pubkey
// prefix — and is not a wire destination (ParseDestination refuses it):
//
//	name        → dm,    ref = the name as typed, targetSpec = "" until
//	              the daemon resolves it (NamesPeer)
//
// so that the fingerprint covers the `to` as typed (wire protocol §3.6).
type Destination struct {
	Kind       string
	Ref        string
	TargetSpec string
}

// NamesPeer reports a `to` that names a peer and is not resolved yet: the
// IPC server sets TargetSpec to the one key the mesh's peer list gives
// it, or refuses the send (CodeUnknownRecipient, CodeAmbiguousRecipient).
func (d Destination) NamesPeer() bool { return d.Kind == KindDM && d.TargetSpec == "" }

// Send is a send request that passed phase A validation. Meta is the RFC 8785
// form of the request's meta object, nil when meta was absent, null or {}.
// Mail is the mail header as requested (nil: none); Thread is the thread
// its sealed copy names, which the daemon resolves for a reply given
// without one (mail.go) — the fingerprint covers the request as typed.
type Send struct {
	Mesh            string // "" when the request named none
	ClientMessageID string // "" when neither header nor body gave one
	Destination     Destination
	Priority        string
	Meta            []byte
	ReplyToID       string
	Body            []byte
	Mail            *Mail
	Thread          string
}

// Header is the mail header the frame carries: Mail with the resolved
// thread; nil when the send has none.
func (s *Send) Header() *Mail {
	if s.Mail == nil {
		return nil
	}
	h := *s.Mail
	if h.ThreadID == "" {
		h.ThreadID = s.Thread
	}
	return &h
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
// object, no unknown fields, no key twice, valid Unicode. Failures are 400
// *Error values.
func DecodeJSON(body []byte, v any) error { return decodeStrict(body, v) }

// decodeStrict decodes one JSON object with no unknown fields and nothing
// after it. What encoding/json would decode without a word is refused, so
// that a request means exactly what its bytes say and two different
// requests never share a fingerprint: invalid UTF-8 and a lone surrogate
// escape (both become U+FFFD), and a top-level key given twice (the last
// would win; keys that differ only in case are the same key to it).
func decodeStrict(body []byte, v any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return badRequest(CodeInvalidJSON, "request body must be a JSON object")
	}
	if !utf8.Valid(body) {
		return badRequest(CodeInvalidUnicode, "request body is not valid UTF-8 (byte %d)", invalidUTF8At(body))
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
	if esc, ok := loneSurrogate(body); ok {
		return badRequest(CodeInvalidUnicode, "%s is half of a UTF-16 surrogate pair without its other half", esc)
	}
	if key, ok := duplicateKey(body); ok {
		return badRequest(CodeDuplicateKey, "key %q is given more than once", key)
	}
	return nil
}

// invalidUTF8At is the offset of the first byte of b that is not valid
// UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// duplicateKey finds the first top-level key of the JSON object body that
// repeats an earlier one as encoding/json matches keys to fields (exactly,
// or else without regard to case: foldKey).
func duplicateKey(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return "", false
		}
		k := foldKey(key)
		if seen[k] {
			return key, true
		}
		seen[k] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return "", false
		}
	}
	return "", false
}

// foldKey is encoding/json's foldName: foldKey(x) == foldKey(y) exactly
// when bytes.EqualFold(x, y), that is when encoding/json may decode both
// keys into one field.
func foldKey(key string) string {
	b := make([]byte, 0, len(key))
	for _, r := range key {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b = append(b, byte(r))
			continue
		}
		for { // the smallest rune of r's fold orbit
			next := unicode.SimpleFold(r)
			if next <= r {
				r = next
				break
			}
			r = next
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b)
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
		if !namesPeer(r.To) {
			return nil, err
		}
		s.Destination = Destination{Kind: KindDM, Ref: r.To}
	}
	if r.Message == nil || *r.Message == "" {
		return nil, badRequest(CodeMissingMessage, "message is required and must not be empty")
	}
	if len(*r.Message) > MaxMessageBytes {
		return nil, &Error{Status: 413, Code: CodeMessageTooLarge,
			Detail: "message is " + strconv.Itoa(len(*r.Message)) + " bytes; the limit is " + strconv.Itoa(MaxMessageBytes) +
				" (" + strconv.Itoa(MaxMessageBytes>>10) + " KiB): nothing was sent; send a shorter text, or split it, or point to a file the recipient can read"}
	}
	if i := strings.IndexByte(*r.Message, 0); i >= 0 {
		return nil, badRequest(CodeMessageHasNUL, "message holds a NUL character (U+0000) at byte %d: a message is text; "+
			"send binary data encoded (base64), or share it as a file", i)
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
	if hasMailKey(s.Meta) {
		return nil, badRequest(CodeInvalidMeta, "meta key %q is reserved for the mail header: use subject, thread_id, importance and ack_required", MailMetaKey)
	}
	if s.Mail, err = mailOf(r, s.ReplyToID); err != nil {
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
		"to must be a 64-hex pubkey, #topic, @group, * or a peer's name (at most %d bytes, something visible), got %q",
		MaxPeerNameBytes, to)
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
	if n := framedLen(canon); n > MaxMetaBytes {
		return nil, badRequest(CodeInvalidMeta,
			"meta is %d bytes as the broker frame carries it (canonical form, <, >, &, U+2028 and U+2029 escaped); the limit is %d",
			n, MaxMetaBytes)
	}
	if bytes.Equal(canon, []byte("{}")) {
		return nil, nil
	}
	return canon, nil
}

// framedLen is the length of JSON text canon once json.Marshal has
// written it into a frame: raw JSON is compacted (canon already is) and
// <, >, & (\u003c) and U+2028, U+2029 (\u2028) escaped.
func framedLen(canon []byte) int {
	n := len(canon)
	for i, c := range canon {
		switch {
		case c == '<' || c == '>' || c == '&':
			n += 5
		case c == 0xe2 && i+2 < len(canon) && canon[i+1] == 0x80 && canon[i+2]&^1 == 0xa8:
			n += 3
		}
	}
	return n
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
		return "", badRequest(CodeInvalidReplyTo, "reply_to_id must be 1-%d printable ASCII characters without spaces", MaxIDLength)
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
