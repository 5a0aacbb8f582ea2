package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Agent mail: a message may carry a mail header — a subject, a thread, the
// message it answers, an importance, a request for an acknowledgement — and
// the daemons exchange receipts (an acknowledgement, or what a contact
// policy did with a message) as messages of their own.
//
// The header travels in the frame's meta under MailMetaKey, as an
// envelope: for a DM the header's JSON is sealed with crypto_box exactly
// as the body is (to the recipient's key, by the sender's, a nonce of its
// own), so that the broker reads neither; for a topic, group or broadcast
// it is plain, as those bodies are. The body stays the message text alone:
// an upstream peer, which ignores meta, reads it as before.
//
// Threads. A message's thread_id is the one the sender gives; a reply
// given without one (reply_to_id only) joins the thread of the message it
// answers, as the sender's daemon knows it, or else starts the thread
// named by that message's client_message_id: the root's id is its thread's
// id. A message with neither is a thread's root, whose id is its own
// client_message_id. So the thread X is every message whose thread_id is X,
// and the message whose client_message_id is X.

// MailMetaKey is the meta key the mail envelope rides under. A request's
// own meta may not use it.
const MailMetaKey = "claudemesh_mail"

// Importance levels; normal is the default, carried as "" in a header.
const (
	ImportanceNormal = "normal"
	ImportanceHigh   = "high"
	ImportanceUrgent = "urgent"
)

// MaxSubjectBytes bounds a subject.
const MaxSubjectBytes = 200

// Receipt kinds: what a recipient's daemon tells a sender about one of its
// messages.
const (
	ReceiptAck      = "ack"      // the recipient acknowledged it
	ReceiptHeld     = "held"     // held as a contact request until Until
	ReceiptRefused  = "refused"  // refused: block_all, or the contact request refused
	ReceiptAccepted = "accepted" // the contact request was accepted; the message was delivered
)

// Mail error codes.
const (
	CodeInvalidSubject    = "invalid_subject"
	CodeInvalidThread     = "invalid_thread_id"
	CodeInvalidImportance = "invalid_importance"
)

// Mail is a message's mail header. A request sets Subject, ThreadID,
// ReplyToID, Importance and AckRequired; a receipt sets Receipt and
// ReceiptFor (the client_message_id it is about), Until (held: when the
// contact request expires, RFC 3339), Reason (refused: why) and Name (its
// sender's display name, which a push drained after a reconnect does not
// carry).
type Mail struct {
	Subject     string `json:"subject,omitempty"`
	ThreadID    string `json:"thread_id,omitempty"`
	ReplyToID   string `json:"reply_to_id,omitempty"`
	Importance  string `json:"importance,omitempty"`
	AckRequired bool   `json:"ack_required,omitempty"`
	Receipt     string `json:"receipt,omitempty"`
	ReceiptFor  string `json:"receipt_for,omitempty"`
	Until       string `json:"until,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Name        string `json:"name,omitempty"`
}

// MailEnvelope is the value of MailMetaKey in a frame's meta: a sealed
// header (Nonce, Box: base64, as a DM's nonce and ciphertext), or a plain
// one (Header). V is 1.
type MailEnvelope struct {
	V      int    `json:"v"`
	Nonce  string `json:"nonce,omitempty"`
	Box    string `json:"box,omitempty"`
	Header *Mail  `json:"header,omitempty"`
}

// mailOf is the header a send request asks for, validated; nil when it
// asks for none (every field empty, importance normal).
func mailOf(r *SendRequest, replyToID string) (*Mail, error) {
	m := &Mail{Subject: r.Subject, ThreadID: r.ThreadID, ReplyToID: replyToID, Importance: r.Importance,
		AckRequired: r.AckRequired}
	if err := checkSubject(m.Subject); err != nil {
		return nil, err
	}
	if m.ThreadID != "" && !validID(m.ThreadID) {
		return nil, badRequest(CodeInvalidThread, "thread_id must be 1-%d printable ASCII characters without spaces", MaxIDLength)
	}
	switch m.Importance {
	case ImportanceNormal:
		m.Importance = ""
	case "", ImportanceHigh, ImportanceUrgent:
	default:
		return nil, badRequest(CodeInvalidImportance, "importance must be normal, high or urgent, not %q", r.Importance)
	}
	if *m == (Mail{}) {
		return nil, nil
	}
	return m, nil
}

func checkSubject(s string) error {
	switch {
	case len(s) > MaxSubjectBytes:
		return badRequest(CodeInvalidSubject, "subject is %d bytes; the limit is %d", len(s), MaxSubjectBytes)
	case !utf8.ValidString(s):
		return badRequest(CodeInvalidSubject, "subject is not valid UTF-8")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return badRequest(CodeInvalidSubject, "subject must be one line without control characters")
	}
	return nil
}

// ImportanceOf is a header's importance as the API shows it: normal for
// none.
func (m *Mail) ImportanceOf() string {
	if m == nil || m.Importance == "" {
		return ImportanceNormal
	}
	return m.Importance
}

// JSON is the header's JSON as it is sealed: the fields in their order,
// nothing HTML-escaped.
func (m *Mail) JSON() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // strings and a bool always encode
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// fingerprintMeta is the meta the request fingerprint covers for a send
// with a header: the request's meta with the header as requested under
// MailMetaKey, in RFC 8785 form, so that a retry that changes the subject
// (or any field) is another request.
func fingerprintMeta(meta []byte, m *Mail) []byte {
	if len(meta) == 0 {
		if canon, ok := m.canonicalMeta(); ok {
			return canon
		}
	}
	merged, err := mergeMeta(meta, m.JSON())
	if err != nil {
		return meta // meta is a canonical object: unreachable
	}
	canon, err := jcs.Transform(merged)
	if err != nil {
		return merged
	}
	return canon
}

// canonicalMeta is fingerprintMeta(nil, m), the header alone under
// MailMetaKey in RFC 8785 form, written directly: the members sorted by
// name, each string as RFC 8785 writes it. ok is false for a string that
// is not valid UTF-8 (encoding/json writes U+FFFD in its place) or holds
// U+2028 or U+2029 (which RFC 8785 leaves as they are, and
// AppendJSONString escapes): the general path canonicalizes those.
// FuzzCanonicalMailMeta holds it to that path: a fingerprint must not
// change between versions.
func (m *Mail) canonicalMeta() (b []byte, ok bool) {
	b = make([]byte, 0, 64+len(m.Subject)+len(m.ThreadID)+len(m.ReplyToID)+len(m.Reason)+len(m.Name))
	b = append(b, `{"`+MailMetaKey+`":{`...)
	sep := ""
	member := func(name, v string) bool {
		if v == "" {
			return true
		}
		if !utf8.ValidString(v) || strings.ContainsAny(v, "\u2028\u2029") {
			return false
		}
		b = append(append(b, sep...), `"`+name+`":`...)
		b = AppendJSONString(b, v, false) // as RFC 8785 writes it, but for U+2028 and U+2029
		sep = ","
		return true
	}
	if m.AckRequired {
		b = append(b, `"ack_required":true`...)
		sep = ","
	}
	// RFC 8785 orders members by name, here all ASCII: byte order.
	if !member("importance", m.Importance) || !member("name", m.Name) || !member("reason", m.Reason) ||
		!member("receipt", m.Receipt) || !member("receipt_for", m.ReceiptFor) || !member("reply_to_id", m.ReplyToID) ||
		!member("subject", m.Subject) || !member("thread_id", m.ThreadID) || !member("until", m.Until) {
		return nil, false
	}
	return append(b, "}}"...), true
}

// FrameMeta is the meta a send frame carries: the request's meta (a JSON
// object, or nil) with env under MailMetaKey.
func FrameMeta(meta []byte, env *MailEnvelope) (json.RawMessage, error) {
	raw, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	if len(meta) == 0 { // raw is compact and escaped: json.Marshal would write it as it is
		return append(append([]byte(`{"`+MailMetaKey+`":`), raw...), '}'), nil
	}
	return mergeMeta(meta, raw)
}

// mergeMeta sets MailMetaKey to value in the JSON object meta (nil: {}).
func mergeMeta(meta, value []byte) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &obj); err != nil {
			return nil, fmt.Errorf("meta: %w", err)
		}
	}
	obj[MailMetaKey] = value
	return json.Marshal(obj)
}

// hasMailKey reports whether the canonical meta object uses MailMetaKey.
func hasMailKey(canon []byte) bool {
	if !bytes.Contains(canon, []byte(`"`+MailMetaKey+`"`)) {
		return false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(canon, &obj) != nil {
		return false
	}
	_, ok := obj[MailMetaKey]
	return ok
}

// ErrMailEnvelope is a pushed meta whose mail envelope cannot be read.
var ErrMailEnvelope = errors.New("mail envelope")

// SplitMail takes the mail envelope out of a pushed message's meta: rest is
// the meta without it (nil when nothing is left), env the envelope (nil
// when there is none). A meta that is not a JSON object has no envelope;
// an envelope that is not one (another version, neither sealed nor plain,
// fields of the wrong type) is an error wrapping ErrMailEnvelope, and rest
// is then the meta without it.
func SplitMail(meta json.RawMessage) (rest json.RawMessage, env *MailEnvelope, err error) {
	if len(meta) == 0 || !bytes.Contains(meta, []byte(MailMetaKey)) {
		return meta, nil, nil
	}
	raw, alone := mailAlone(meta)
	if !alone {
		var found bool
		if rest, raw, found, err = takeMail(meta); !found {
			return meta, nil, err
		}
	}
	env = &MailEnvelope{}
	if err := unmarshalFlat(raw, env, envelopeFields); err != nil {
		return rest, nil, fmt.Errorf("%w: %v", ErrMailEnvelope, err)
	}
	if err := env.check(); err != nil {
		return rest, nil, err
	}
	return rest, env, nil
}

// takeMail takes the mail envelope out of a meta object of any shape:
// found is false when meta is no JSON object or has none, or (with err)
// when the rest cannot be encoded again.
func takeMail(meta json.RawMessage) (rest, env json.RawMessage, found bool, err error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(meta, &obj) != nil {
		return nil, nil, false, nil
	}
	env, found = obj[MailMetaKey]
	if !found {
		return nil, nil, false, nil
	}
	delete(obj, MailMetaKey)
	if len(obj) > 0 {
		if rest, err = json.Marshal(obj); err != nil {
			return nil, nil, false, err
		}
	}
	return rest, env, true, nil
}

// check says whether e is an envelope of this version, sealed or plain.
func (e *MailEnvelope) check() error {
	sealed := e.Nonce != "" || e.Box != ""
	switch {
	case e.V != 1:
		return fmt.Errorf("%w: version %d", ErrMailEnvelope, e.V)
	case sealed == (e.Header != nil), sealed && (e.Nonce == "" || e.Box == ""):
		return fmt.Errorf("%w: neither sealed (nonce and box) nor plain (header)", ErrMailEnvelope)
	}
	return nil
}

// maxHeaderBytes bounds an opened header: the largest a request or a
// receipt makes is well under it.
const maxHeaderBytes = 4 << 10

// mailAlone reads a meta that is the mail envelope alone,
// {"claudemesh_mail":{…}}, the shape every mail of ours has, in one pass
// and without a map: its envelope, as encoding/json would give it (the
// object's bytes, which it checks). Any other meta is not alone.
func mailAlone(meta []byte) (json.RawMessage, bool) {
	r := flatReader{b: meta}
	r.space()
	if !r.skip('{') {
		return nil, false
	}
	r.space()
	if key, ok := r.plainString(); !ok || string(key) != MailMetaKey {
		return nil, false
	}
	r.space()
	if !r.skip(':') {
		return nil, false
	}
	r.space()
	env, ok := r.object()
	if !ok {
		return nil, false
	}
	r.space()
	return env, r.skip('}') && r.end()
}

// envelopeFields are the members of a sealed envelope, which decodeFlat
// takes; a plain one (its header an object) is left to encoding/json.
var envelopeFields = flatFields(map[string]flatField[MailEnvelope]{
	"v":     {num: func(e *MailEnvelope, n int64) { e.V = int(n) }},
	"nonce": {str: func(e *MailEnvelope, s string) { e.Nonce = s }},
	"box":   {str: func(e *MailEnvelope, s string) { e.Box = s }},
})

// ParseMail reads an opened header (a sealed envelope's plaintext) and
// checks it as a request's header is checked; the receipt fields must name
// a kind and an id, and Until be RFC 3339. Unknown fields are ignored, so
// that a newer sender's header still reads.
func ParseMail(b []byte) (*Mail, error) {
	if len(b) > maxHeaderBytes {
		return nil, fmt.Errorf("%w: header of %d bytes", ErrMailEnvelope, len(b))
	}
	var m Mail
	if err := unmarshalFlat(b, &m, mailFields); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMailEnvelope, err)
	}
	return &m, m.check()
}

// mailFields are a header's members, which decodeFlat takes; a header
// with another (a newer sender's) is left to encoding/json.
var mailFields = flatFields(map[string]flatField[Mail]{
	"subject":      {str: func(m *Mail, s string) { m.Subject = s }},
	"thread_id":    {str: func(m *Mail, s string) { m.ThreadID = s }},
	"reply_to_id":  {str: func(m *Mail, s string) { m.ReplyToID = s }},
	"importance":   {str: func(m *Mail, s string) { m.Importance = s }},
	"ack_required": {flag: func(m *Mail, b bool) { m.AckRequired = b }},
	"receipt":      {str: func(m *Mail, s string) { m.Receipt = s }},
	"receipt_for":  {str: func(m *Mail, s string) { m.ReceiptFor = s }},
	"until":        {str: func(m *Mail, s string) { m.Until = s }},
	"reason":       {str: func(m *Mail, s string) { m.Reason = s }},
	"name":         {str: func(m *Mail, s string) { m.Name = s }},
})

// check validates a header read from the mesh.
func (m *Mail) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrMailEnvelope}, args...)...)
	}
	if err := checkSubject(m.Subject); err != nil {
		return bad("%v", err)
	}
	for _, id := range []string{m.ThreadID, m.ReplyToID} {
		if id != "" && !validID(id) {
			return bad("an id is not 1-%d printable ASCII characters without spaces", MaxIDLength)
		}
	}
	switch m.Importance {
	case "", ImportanceHigh, ImportanceUrgent:
	case ImportanceNormal:
		m.Importance = ""
	default:
		return bad("importance %q", m.Importance)
	}
	switch m.Receipt {
	case "":
		if m.ReceiptFor != "" || m.Until != "" || m.Reason != "" || m.Name != "" {
			return bad("receipt fields without a receipt")
		}
		return nil
	case ReceiptAck, ReceiptHeld, ReceiptRefused, ReceiptAccepted:
	default:
		return bad("receipt kind %q", m.Receipt)
	}
	if !validID(m.ReceiptFor) {
		return bad("receipt_for is not a client_message_id")
	}
	if m.Until != "" {
		if _, err := time.Parse(time.RFC3339Nano, m.Until); err != nil {
			return bad("until is not an RFC 3339 time")
		}
	}
	for _, text := range []string{m.Reason, m.Name} {
		if len(text) > MaxSubjectBytes || !utf8.ValidString(text) {
			return bad("a reason or name is not %d bytes of UTF-8 at most", MaxSubjectBytes)
		}
	}
	return nil
}
