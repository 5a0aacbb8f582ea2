package web

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
)

// handlerTransport carries the view's API calls to the daemon's handler in
// this process: a request in, the whole answer recorded, no socket.
type handlerTransport struct{ api http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	t.api.ServeHTTP(rec, req)
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{StatusCode: rec.status, Status: strconv.Itoa(rec.status) + " " + http.StatusText(rec.status),
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req}, nil
}

// recorder is the ResponseWriter of an in-process API call.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}

// events relays the daemon's event stream (GET /v1/events) to the page,
// resuming after the Last-Event-ID the browser's EventSource sends back
// when it reconnects: the API's own handler writes to the browser. The
// stream ends with the browser's sign-in (a sign-out, from any copy of
// its cookie).
func (v *View) events(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ended := v.in.endOf(s.nonce)
	go func() {
		select {
		case <-ended:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/v1/events", nil)
	if err != nil {
		v.refuse(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		req.Header.Set("Last-Event-ID", id)
	}
	v.opts.API.ServeHTTP(w, req)
}
