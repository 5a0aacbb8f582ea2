package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slowClients is more connections than the daemon has request slots (64).
const slowClients = 70

// slowBody is a connection that sent a request's headers, promised a
// megabyte of body and sent one byte of it.
type slowBody struct {
	conn net.Conn
	rd   *bufio.Reader
}

// openSlowBody sends POST path with Content-Length 1000000 and Expect:
// 100-continue. The daemon answers 100 Continue when it starts reading the
// body, which is how the test knows the request is in: it then sends one
// byte. status is the first status line the daemon answered.
func openSlowBody(t *testing.T, sock, path string) (*slowBody, string) {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", sock, err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
		"Content-Length: 1000000\r\nExpect: 100-continue\r\n\r\n", path)
	s := &slowBody{conn: c, rd: bufio.NewReader(c)}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	status, err := s.rd.ReadString('\n')
	if err != nil {
		t.Fatalf("slow client: no answer to the headers: %v", err)
	}
	status = strings.TrimSpace(status)
	if status == "HTTP/1.1 100 Continue" {
		if blank, err := s.rd.ReadString('\n'); err != nil || blank != "\r\n" {
			t.Fatalf("slow client: after 100 Continue %q, %v", blank, err)
		}
		if _, err := c.Write([]byte("{")); err != nil {
			t.Fatalf("slow client: write a byte: %v", err)
		}
	}
	c.SetReadDeadline(time.Time{})
	return s, status
}

// answer reads what the daemon answers the slow client within d: the
// response, or the read error (io.EOF: closed without an answer).
func (s *slowBody) answer(d time.Duration) (*http.Response, string, error) {
	s.conn.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(s.rd, nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body), nil
}

// openSlowBodies opens n slow clients and fails the test (going on with
// those taken) unless the daemon took every one in.
func openSlowBodies(t *testing.T, sock string, n int) []*slowBody {
	t.Helper()
	out := make([]*slowBody, 0, n)
	for i := range n {
		s, status := openSlowBody(t, sock, "/v1/send")
		if status != "HTTP/1.1 100 Continue" {
			t.Errorf("slow client %d of %d was answered %q before sending its body", i+1, n, status)
			continue
		}
		out = append(out, s)
	}
	return out
}

// TestSlowBodiesDoNotBlockHealthStatusOrStop: 70 connections that trickle
// a request body do not lock the API out: health, version, metrics,
// `daemon status` and a send answer while they hang, and `daemon down`
// stops the daemon promptly, returning its inflight rows to pending.
func TestSlowBodiesDoNotBlockHealthStatusOrStop(t *testing.T) {
	e := newEnv(t)
	// A body deadline far longer than the test: the slow clients hang
	// until the stop.
	pid := startDetached(t, e, "--no-tcp", "--body-timeout", "10m")
	c := unixClient(e.socket())
	defer c.CloseIdleConnections()
	mustSend(t, c, "*", "will be inflight", "sb-1")
	execSQL(t, e, `UPDATE outbox SET status = 'inflight', attempts = 2 WHERE client_message_id = 'sb-1'`)

	slow := openSlowBodies(t, e.socket(), slowClients)

	probe := &http.Client{Transport: c.Transport, Timeout: 2 * time.Second}
	for _, path := range []string{"/v1/health", "/v1/version", "/v1/metrics"} {
		resp, err := probe.Get("http://localhost" + path)
		if err != nil {
			t.Fatalf("GET %s with %d slow clients: %v", path, slowClients, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s with %d slow clients: %d, want 200", path, slowClients, resp.StatusCode)
		}
	}
	if st := runCLI(t, e, "daemon", "status"); st.code != 0 || !strings.Contains(st.stdout, fmt.Sprintf("daemon: running, pid %d,", pid)) {
		t.Errorf("daemon status with %d slow clients: exit %d\n%s%s", slowClients, st.code, st.stdout, st.stderr)
	}
	mustSend(t, c, "*", "gets through", "sb-2")
	c.CloseIdleConnections()

	start := time.Now()
	down := runCLI(t, e, "daemon", "down")
	if down.code != 0 || down.stdout != fmt.Sprintf("daemon stopped (pid %d)\n", pid) {
		t.Fatalf("daemon down with %d slow clients: exit %d\nstdout:\n%s\nstderr:\n%s", slowClients, down.code, down.stdout, down.stderr)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("daemon down took %s with slow clients hanging, want the stop not to wait for them", took)
	}
	if status, attempts, _ := rowState(t, e, "sb-1"); status != "pending" || attempts != 2 {
		t.Errorf("sb-1 after daemon down: %s attempts %d, want pending 2 (released)", status, attempts)
	}
	if status, _, _ := rowState(t, e, "sb-2"); status != "pending" {
		t.Errorf("sb-2 after daemon down: %s, want pending", status)
	}
	// Each slow client was told the daemon is stopping, or just closed.
	for i, s := range slow {
		resp, body, err := s.answer(5 * time.Second)
		if err == nil && (resp.StatusCode != 503 || !strings.Contains(body, `"daemon_stopping"`)) {
			t.Errorf("slow client %d after the stop: %d %s", i, resp.StatusCode, body)
		} else if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF && !strings.Contains(err.Error(), "reset") {
			t.Errorf("slow client %d after the stop: %v, want an answer or a closed connection", i, err)
		}
	}
}

// TestSlowBodyAnswered408: a body that does not arrive within the body
// deadline is answered 408 body_timeout and its connection closed; a send
// whose body arrives at once is accepted meanwhile.
func TestSlowBodyAnswered408(t *testing.T) {
	e := newEnv(t)
	d := startSettled(t, e, "--no-tcp", "--body-timeout", "300ms")
	slow := openSlowBodies(t, e.socket(), slowClients)
	c := unixClient(e.socket())
	mustSend(t, c, "*", "meanwhile", "sb408-1")
	c.CloseIdleConnections()
	for i, s := range slow {
		resp, body, err := s.answer(5 * time.Second)
		if err != nil {
			t.Fatalf("slow client %d: no answer: %v", i, err)
		}
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"error":"body_timeout"`) || !resp.Close {
			t.Errorf("slow client %d: %d close=%v %s, want 408 body_timeout and the connection closed", i, resp.StatusCode, resp.Close, body)
		}
	}
	// The slots the slow clients never held are all free.
	for i := range 3 {
		mustSend(t, c, "*", "after", fmt.Sprintf("sb408-after-%d", i))
	}
	c.CloseIdleConnections()
	d.stop()
}
