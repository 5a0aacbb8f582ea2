package ipcserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawConn is a connection to the harness's listener written by hand, for
// requests no http.Client sends (bodies that trickle, half-sent headers).
type rawConn struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

func (h *harness) dial() *rawConn {
	h.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return &rawConn{t: h.t, c: c, rd: bufio.NewReader(c)}
}

// startBody sends a POST's headers promising length bytes, waits for the
// server's 100 Continue (it has begun to read the body) and sends one byte.
func (h *harness) startBody(path string, length int) *rawConn {
	h.t.Helper()
	rc := h.dial()
	fmt.Fprintf(rc.c, "POST %s HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", path, testToken, length)
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := rc.rd.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		h.t.Fatalf("want 100 Continue, got %q %v", line, err)
	}
	if line, err := rc.rd.ReadString('\n'); err != nil || line != "\r\n" {
		h.t.Fatalf("after 100 Continue: %q %v", line, err)
	}
	if _, err := rc.c.Write([]byte("{")); err != nil {
		h.t.Fatal(err)
	}
	return rc
}

// answer reads the response within d.
func (rc *rawConn) answer(d time.Duration) (*http.Response, string, error) {
	rc.c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(rc.rd, nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func withBodyTimeout(d time.Duration) harnessOpt {
	return func(_ *harness, o *Options) { o.BodyTimeout = d }
}

// TestBodyTimeout: a body that does not arrive within BodyTimeout is
// answered 408 body_timeout and the connection closed; it never held a
// request slot meanwhile.
func TestBodyTimeout(t *testing.T) {
	h := newHarness(t, withBodyTimeout(200*time.Millisecond))
	slow := h.startBody("/v1/send", 1000)
	if n := len(h.srv.inflight); n != 0 {
		t.Errorf("%d slots held while a body arrives, want 0", n)
	}
	resp, body, err := slow.answer(5 * time.Second)
	if err != nil {
		t.Fatalf("no answer to a slow body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"error":"body_timeout"`) || !resp.Close {
		t.Errorf("slow body: %d close=%v %s, want 408 body_timeout and Connection: close", resp.StatusCode, resp.Close, body)
	}
	if _, err := slow.rd.ReadByte(); err != io.EOF {
		t.Errorf("after the 408 the connection reads %v, want EOF", err)
	}
}

// TestBodyLimits: a declared length over the limit is refused before any
// of it is read; a chunked body over the limit when it passes it.
func TestBodyLimits(t *testing.T) {
	h := newHarness(t)
	rc := h.dial()
	fmt.Fprintf(rc.c, "POST /v1/send HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		testToken, DefaultMaxBodyBytes+1)
	if resp, body, err := rc.answer(5 * time.Second); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge ||
		!strings.Contains(body, "payload_too_large") {
		t.Errorf("declared length over the limit: %v %v %s", resp, err, body)
	}
	big := strings.NewReader(strings.Repeat("x", DefaultMaxBodyBytes+10))
	req, _ := http.NewRequest(http.MethodPost, h.base+"/v1/send", io.MultiReader(big)) // no length: chunked
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked body over the limit: %d, want 413", resp.StatusCode)
	}
}

// TestProbesAnswerWhenSlotsAreFull: with every shared slot taken, health,
// version and metrics answer from their reserve and other requests get 429.
func TestProbesAnswerWhenSlotsAreFull(t *testing.T) {
	h := newHarness(t)
	for range DefaultMaxInflight {
		h.srv.inflight <- struct{}{}
	}
	for _, path := range []string{"/v1/health", "/v1/version", "/v1/metrics"} {
		resp := h.request(context.Background(), http.MethodGet, path, "")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with every slot taken: %d, want 200", path, resp.StatusCode)
		}
	}
	h.wantError(http.MethodGet, "/v1/outbox", "", http.StatusTooManyRequests, "daemon_busy")
	h.wantError(http.MethodPost, "/v1/send", `{"to":"*","message":"m"}`, http.StatusTooManyRequests, "daemon_busy")
	for range DefaultProbeReserve {
		h.srv.probes <- struct{}{}
	}
	h.wantError(http.MethodGet, "/v1/health", "", http.StatusTooManyRequests, "daemon_busy")
}

// TestShutdownEndsWhatWouldHoldIt: Shutdown does not wait for bodies that
// trickle (answered 503 daemon_stopping), for connections that have sent
// half a request or nothing (closed), nor for idle keep-alive connections.
func TestShutdownEndsWhatWouldHoldIt(t *testing.T) {
	h := newHarness(t) // the default body deadline, 10 s: far longer than the test allows the stop
	slow := h.startBody("/v1/send", 1000)
	half := h.dial()
	fmt.Fprint(half.c, "GET /v1/health HTTP/1.1\r\nHost: local")
	silent := h.dial()
	idle := h.dial()
	fmt.Fprintf(idle.c, "GET /v1/version HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
	if resp, _, err := idle.answer(5 * time.Second); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("keep-alive request: %v %v", resp, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v after %s", err, time.Since(start))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Shutdown took %s", took)
	}
	resp, body, err := slow.answer(5 * time.Second)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"error":"daemon_stopping"`) {
		t.Errorf("a trickling body at the stop: %v %s %v, want 503 daemon_stopping", resp, body, err)
	}
	for name, rc := range map[string]*rawConn{"half-sent headers": half, "nothing sent": silent, "idle keep-alive": idle} {
		rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		// Closed: EOF, or a reset when the server closed the connection
		// before reading what the client had sent (the half request).
		if _, err := rc.rd.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: after Shutdown the connection reads %v, want it closed", name, err)
		}
	}
}
