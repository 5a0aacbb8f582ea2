package ipcserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
)

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

// reply is an actor's answer that may carry the store's error.
type reply interface{ Failure() error }

// meshAsk relays req to the broker connection of the mesh the request acts
// on and returns the mesh as the answer names it (a session's own mesh
// for a session) and the reply.
func meshAsk[T reply](s *Server, r *http.Request, named string, req any) (string, T, error) {
	return meshAskWithin[T](s, r, named, req, DefaultRequestTimeout)
}

// meshAskWithin is meshAsk with a deadline of its own.
func meshAskWithin[T reply](s *Server, r *http.Request, named string, req any, timeout time.Duration) (string, T, error) {
	var zero T
	mesh, err := s.scope(r, named)
	if err != nil {
		return "", zero, err
	}
	slug := mesh.Info.Mesh
	pid, err := s.meshActor(slug)
	if err != nil {
		return "", zero, err
	}
	reply, err := askWithin[T](s, pid, req, timeout)
	if err != nil {
		return "", zero, brokerError(slug, err)
	}
	if sess := sessionOf(r); sess != nil {
		slug = sess.Mesh
	}
	return slug, reply, nil
}

// ask sends msg to pid, waits up to DefaultRequestTimeout for a reply of
// type T and returns it, or the error of the request or of the store.
func ask[T reply](s *Server, pid *actor.PID, msg any) (T, error) {
	return askWithin[T](s, pid, msg, DefaultRequestTimeout)
}

// askWithin is ask with a deadline of its own; no answer in time is
// actor.ErrTimeout.
func askWithin[T reply](s *Server, pid *actor.PID, msg any, timeout time.Duration) (T, error) {
	var zero T
	res, ok := s.replies.ask(pid, msg, timeout)
	if !ok {
		return zero, actor.ErrTimeout
	}
	r, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("%T answered %T, want %T", msg, res, zero)
	}
	if err := r.Failure(); err != nil {
		return zero, err
	}
	return r, nil
}
