package ipcserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The two ends of a handler: reading the request (its body, strictly
// decoded and validated; its query parameters) and rendering the answer,
// JSON or the error envelope statusFor gives an error. What lies between,
// the ask, is in ask.go.

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Header values every answer shares (net/http never changes a value slice).
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// writeJSON renders v with status and an exact Content-Length.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.Reset()
		buf.WriteString(`{"error":"internal","detail":"response could not be encoded"}` + "\n")
		status = http.StatusInternalServerError
	}
	writeBody(w, status, buf.Bytes())
}

// writeBody answers status with body, JSON, and its exact Content-Length.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body)
}

// writeError renders err as the error envelope with the status statusFor
// gives it.
func writeError(w http.ResponseWriter, err error) {
	status, body := statusFor(err)
	writeJSON(w, status, body)
}

// statusFor maps every error a handler can meet to its status and envelope.
func statusFor(err error) (int, *messages.ErrorBody) {
	var me *messages.Error
	switch {
	case errors.As(err, &me):
		return me.Status, &messages.ErrorBody{Error: me.Code, Detail: me.Detail, Candidates: me.Candidates, Attached: me.Attached, State: me.State}
	case errors.Is(err, actor.ErrTimeout), errors.Is(err, messages.ErrStoreUnavailable):
		return http.StatusServiceUnavailable, &messages.ErrorBody{Error: messages.CodeUnavailable,
			Detail: "the store did not answer in time; retry with the same client_message_id"}
	}
	return http.StatusInternalServerError, &messages.ErrorBody{Error: messages.CodeInternal, Detail: err.Error()}
}

// tooLarge answers a body over DefaultMaxBodyBytes.
var tooLarge = &messages.Error{Status: http.StatusRequestEntityTooLarge, Code: messages.CodePayloadTooLarge,
	Detail: "request body exceeds " + strconv.Itoa(DefaultMaxBodyBytes) + " bytes"}

// readBody reads a request body of at most DefaultMaxBodyBytes into a pooled
// buffer; the caller returns it with bufPool.Put.
func readBody(w http.ResponseWriter, r *http.Request) (*bytes.Buffer, error) {
	if r.ContentLength > DefaultMaxBodyBytes {
		return nil, tooLarge
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, DefaultMaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		bufPool.Put(buf)
		return nil, tooLarge
	case err != nil && !errors.Is(err, io.EOF):
		bufPool.Put(buf)
		return nil, &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidJSON, Detail: "reading body: " + err.Error()}
	}
	return buf, nil
}

// decodeValid reads a JSON request body strictly into v and validates it.
func decodeValid(w http.ResponseWriter, r *http.Request, v interface{ Validate() error }) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	defer bufPool.Put(body)
	if err := messages.DecodeJSON(body.Bytes(), v); err != nil {
		return err
	}
	return v.Validate()
}

// nonNil renders an absent list as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// boolQuery reads the query parameter name as true or false (absent: def).
func boolQuery(v url.Values, name string, def bool) (bool, error) {
	switch v.Get(name) {
	case "":
		return def, nil
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, invalidQuery(name + " must be true or false")
}

// invalidQuery is the 400 invalid_query a malformed query parameter gets.
func invalidQuery(detail string) error {
	return &messages.Error{Status: http.StatusBadRequest, Code: messages.CodeInvalidQuery, Detail: detail}
}
