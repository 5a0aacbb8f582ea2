package messages

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The hot bodies — a POST /v1/send request, a send frame, a push, an ack,
// a mail header — are nearly always flat JSON objects: known keys, plain
// strings, integers and booleans, and in a frame of mail one object kept
// as it is written (its meta). decodeFlat reads exactly that shape in one
// pass, without reflection; anything else (another nested value, null, an
// escape in a string, an unknown or differently cased key, a key given
// twice, a number with a fraction or an exponent) makes it give up, and the
// caller decodes with encoding/json, which decides every answer, errors
// included. Where decodeFlat succeeds, its result is encoding/json's
// (FuzzDecodeFlat checks it differentially).

// flatField sets one member of a T from a flat JSON value; a nil setter
// means the member does not take that kind of value. bit is the member's
// own bit among its decoder's (flatFields), to see a key given twice.
type flatField[T any] struct {
	str  func(*T, string)
	num  func(*T, int64)
	flag func(*T, bool)
	obj  func(*T, json.RawMessage) // a JSON object, as it is written
	bit  uint64
}

// flatFields gives each member of fields its bit.
func flatFields[T any](fields map[string]flatField[T]) map[string]flatField[T] {
	if len(fields) > 64 {
		panic("flatFields: more members than bits")
	}
	for i, key := range slices.Sorted(maps.Keys(fields)) {
		f := fields[key]
		f.bit = 1 << i
		fields[key] = f
	}
	return fields
}

// decodeFlat decodes data into v through fields (by exact key) and reports
// whether it could; v may be half filled when it could not.
func decodeFlat[T any](data []byte, v *T, fields map[string]flatField[T]) bool {
	r := flatReader{b: data}
	r.space()
	if !r.skip('{') {
		return false
	}
	r.space()
	if r.skip('}') {
		return r.end()
	}
	var seen uint64
	for {
		key, ok := r.plainString()
		if !ok {
			return false
		}
		f, known := fields[string(key)]
		r.space()
		if !known || seen&f.bit != 0 || !r.skip(':') {
			return false // unknown, or given twice: encoding/json decides
		}
		seen |= f.bit
		r.space()
		if !flatValue(&r, v, f) {
			return false
		}
		r.space()
		switch {
		case r.skip(','):
			r.space()
		case r.skip('}'):
			return r.end()
		default:
			return false
		}
	}
}

type flatReader struct {
	b []byte
	i int
}

func (r *flatReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *flatReader) skip(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// end says only white space follows.
func (r *flatReader) end() bool {
	r.space()
	return r.i == len(r.b)
}

// flatValue reads one string, integer or boolean into v through f.
func flatValue[T any](r *flatReader, v *T, f flatField[T]) bool {
	if r.i >= len(r.b) {
		return false
	}
	switch c := r.b[r.i]; {
	case c == '"' && f.str != nil:
		s, ok := r.plainString()
		if ok {
			f.str(v, string(s))
		}
		return ok
	case (c == '-' || c >= '0' && c <= '9') && f.num != nil:
		n, ok := r.integer()
		if ok {
			f.num(v, n)
		}
		return ok
	case (c == 't' || c == 'f') && f.flag != nil:
		b, ok := r.literal()
		if ok {
			f.flag(v, b)
		}
		return ok
	case c == '{' && f.obj != nil:
		o, ok := r.object()
		if ok {
			f.obj(v, bytes.Clone(o))
		}
		return ok
	}
	return false
}

// object reads a JSON object and returns its bytes (within the input). Its
// end is where its braces balance outside strings; encoding/json then
// checks what lies between, so that anything but a valid object (whose
// end that is) gives up.
func (r *flatReader) object() ([]byte, bool) {
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return nil, false
	}
	start, depth, inString := r.i, 0, false
	for ; r.i < len(r.b); r.i++ {
		c := r.b[r.i]
		switch {
		case inString && c == '\\':
			r.i++ // the escaped character
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				r.i++
				o := r.b[start:r.i]
				return o, json.Valid(o)
			}
		}
	}
	return nil, false
}

// plainString reads a string with no escape and no control character, of
// valid UTF-8, and returns its bytes (within the input).
func (r *flatReader) plainString() ([]byte, bool) {
	if !r.skip('"') {
		return nil, false
	}
	start, ascii := r.i, true
	for ; r.i < len(r.b); r.i++ {
		switch c := r.b[r.i]; {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// integer reads a JSON number that is a plain integer within int64.
func (r *flatReader) integer() (int64, bool) {
	start := r.i
	r.skip('-')
	digits := r.i
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
	}
	switch {
	case r.i == digits, r.b[digits] == '0' && r.i > digits+1:
		return 0, false // no digit, or a leading zero
	case r.i < len(r.b) && (r.b[r.i] == '.' || r.b[r.i] == 'e' || r.b[r.i] == 'E'):
		return 0, false
	}
	n, err := strconv.ParseInt(string(r.b[start:r.i]), 10, 64)
	return n, err == nil
}

// literal reads true or false.
func (r *flatReader) literal() (bool, bool) {
	for _, lit := range [...]string{"true", "false"} {
		if len(r.b)-r.i >= len(lit) && string(r.b[r.i:r.i+len(lit)]) == lit {
			r.i += len(lit)
			return lit == "true", true
		}
	}
	return false, false
}

// unmarshalFlat decodes data into v as json.Unmarshal does: in one flat
// pass where decodeFlat can, else by encoding/json into a v reset to its
// zero value (decodeFlat may have half filled it).
func unmarshalFlat[T any](data []byte, v *T, fields map[string]flatField[T]) error {
	if decodeFlat(data, v, fields) {
		return nil
	}
	*v = *new(T)
	return json.Unmarshal(data, v)
}

// flatFrame is a frame type with a flat decoder (DecodeFrame tries it
// first).
type flatFrame interface{ decodeFlat(data []byte) bool }

func (f *PushFrame) decodeFlat(data []byte) bool { return decodeFlat(data, f, pushFields) }
func (f *AckFrame) decodeFlat(data []byte) bool  { return decodeFlat(data, f, ackFields) }
func (f *SendFrame) decodeFlat(data []byte) bool { return decodeFlat(data, f, sendFrameFields) }

// The members each flat decoder takes: the JSON names of the types' tags.
// Of the json.RawMessage members, the meta of a push and of a send frame
// is, as an object (a mail header rides in it); a push's eventData is
// not: a push that has one is decoded by encoding/json.
var (
	sendRequestFields = flatFields(map[string]flatField[SendRequest]{
		"to":                {str: func(r *SendRequest, s string) { r.To = s }},
		"message":           {str: func(r *SendRequest, s string) { r.Message = &s }},
		"priority":          {str: func(r *SendRequest, s string) { r.Priority = s }},
		"reply_to_id":       {str: func(r *SendRequest, s string) { r.ReplyToID = s }},
		"replyToId":         {str: func(r *SendRequest, s string) { r.ReplyToIDCompat = s }},
		"client_message_id": {str: func(r *SendRequest, s string) { r.ClientMessageID = s }},
		"mesh":              {str: func(r *SendRequest, s string) { r.Mesh = s }},
		"subject":           {str: func(r *SendRequest, s string) { r.Subject = s }},
		"thread_id":         {str: func(r *SendRequest, s string) { r.ThreadID = s }},
		"importance":        {str: func(r *SendRequest, s string) { r.Importance = s }},
		"ack_required":      {flag: func(r *SendRequest, b bool) { r.AckRequired = b }},
	})
	pushFields = flatFields(map[string]flatField[PushFrame]{
		"type":                {str: func(f *PushFrame, s string) { f.Type = s }},
		"messageId":           {str: func(f *PushFrame, s string) { f.MessageID = s }},
		"meshId":              {str: func(f *PushFrame, s string) { f.MeshID = s }},
		"senderPubkey":        {str: func(f *PushFrame, s string) { f.SenderPubkey = s }},
		"senderMemberPubkey":  {str: func(f *PushFrame, s string) { f.SenderMemberPubkey = s }},
		"senderName":          {str: func(f *PushFrame, s string) { f.SenderName = s }},
		"targetSpec":          {str: func(f *PushFrame, s string) { f.TargetSpec = s }},
		"topic":               {str: func(f *PushFrame, s string) { f.Topic = s }},
		"replyToId":           {str: func(f *PushFrame, s string) { f.ReplyToID = s }},
		"priority":            {str: func(f *PushFrame, s string) { f.Priority = s }},
		"nonce":               {str: func(f *PushFrame, s string) { f.Nonce = s }},
		"ciphertext":          {str: func(f *PushFrame, s string) { f.Ciphertext = s }},
		"createdAt":           {str: func(f *PushFrame, s string) { f.CreatedAt = s }},
		"client_message_id":   {str: func(f *PushFrame, s string) { f.ClientMessageID = s }},
		"request_fingerprint": {str: func(f *PushFrame, s string) { f.RequestFingerprint = s }},
		"history_id":          {str: func(f *PushFrame, s string) { f.HistoryID = s }},
		"subtype":             {str: func(f *PushFrame, s string) { f.Subtype = s }},
		"event":               {str: func(f *PushFrame, s string) { f.Event = s }},
		"meta":                {obj: func(f *PushFrame, o json.RawMessage) { f.Meta = o }},
	})
	sendFrameFields = flatFields(map[string]flatField[SendFrame]{
		"type":                {str: func(f *SendFrame, s string) { f.Type = s }},
		"id":                  {str: func(f *SendFrame, s string) { f.ID = s }},
		"client_message_id":   {str: func(f *SendFrame, s string) { f.ClientMessageID = s }},
		"request_fingerprint": {str: func(f *SendFrame, s string) { f.RequestFingerprint = s }},
		"targetSpec":          {str: func(f *SendFrame, s string) { f.TargetSpec = s }},
		"priority":            {str: func(f *SendFrame, s string) { f.Priority = s }},
		"nonce":               {str: func(f *SendFrame, s string) { f.Nonce = s }},
		"ciphertext":          {str: func(f *SendFrame, s string) { f.Ciphertext = s }},
		"replyToId":           {str: func(f *SendFrame, s string) { f.ReplyToID = s }},
		"meta":                {obj: func(f *SendFrame, o json.RawMessage) { f.Meta = o }},
		"first_send":          {flag: func(f *SendFrame, b bool) { f.FirstSend = b }},
	})
	ackFields = flatFields(map[string]flatField[AckFrame]{
		"type":                      {str: func(f *AckFrame, s string) { f.Type = s }},
		"id":                        {str: func(f *AckFrame, s string) { f.ID = s }},
		"messageId":                 {str: func(f *AckFrame, s string) { f.MessageID = s }},
		"queued":                    {flag: func(f *AckFrame, b bool) { f.Queued = b }},
		"error":                     {str: func(f *AckFrame, s string) { f.Error = s }},
		"client_message_id":         {str: func(f *AckFrame, s string) { f.ClientMessageID = s }},
		"code":                      {num: func(f *AckFrame, n int64) { f.Code = int(n) }},
		"broker_message_id":         {str: func(f *AckFrame, s string) { f.BrokerMessageID = s }},
		"history_id":                {str: func(f *AckFrame, s string) { f.HistoryID = s }},
		"duplicate":                 {flag: func(f *AckFrame, b bool) { f.Duplicate = b }},
		"history_available":         {flag: func(f *AckFrame, b bool) { f.HistoryAvailable = &b }},
		"first_seen_at":             {str: func(f *AckFrame, s string) { f.FirstSeenAt = s }},
		"conflict":                  {str: func(f *AckFrame, s string) { f.Conflict = s }},
		"broker_fingerprint_prefix": {str: func(f *AckFrame, s string) { f.BrokerFingerprintPrefix = s }},
		"retry_after_ms":            {num: func(f *AckFrame, n int64) { f.RetryAfterMs = &n }},
		"_reqId":                    {str: func(f *AckFrame, s string) { f.ReqID = &s }},
	})
)
