package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

const maxBody = 1 << 20 // the daemon's request body limit

// TestTCPAuthAndHygiene runs the request gate of a real daemon on its TCP
// port (and the parts that apply to the socket too).
func TestTCPAuthAndHygiene(t *testing.T) {
	e := newEnv(t)
	d := startDaemon(t, e, "--tcp", "127.0.0.1:0")
	port := readPort(t, e)
	token := readTrimmed(t, e, "local-token")
	if token == "" {
		t.Fatal("local-token is empty")
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	tc := tcpClient()
	uc := unixClient(e.socket())
	defer tc.CloseIdleConnections()
	defer uc.CloseIdleConnections()

	type tcase struct {
		name     string
		client   *http.Client
		method   string
		url      string
		body     []byte
		header   map[string]string
		host     string
		status   int
		errCode  string // "" for a 2xx answer
		validate func(t *testing.T, r *response)
	}
	bearer := map[string]string{"Authorization": "Bearer " + token}
	with := func(kv ...string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + token}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	versionPID := func(t *testing.T, r *response) {
		if pid, _ := r.json(t)["pid"].(float64); int(pid) != d.pid() {
			t.Errorf("version pid %v, want %d", r.json(t)["pid"], d.pid())
		}
	}
	cases := []tcase{
		{name: "no token", client: tc, method: "GET", url: base + "/v1/version", status: 401, errCode: "unauthorized",
			validate: func(t *testing.T, r *response) {
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("401 without WWW-Authenticate: Bearer (%q)", r.header.Get("WWW-Authenticate"))
				}
			}},
		{name: "wrong token", client: tc, method: "GET", url: base + "/v1/version",
			header: map[string]string{"Authorization": "Bearer " + strings.Repeat("x", len(token))}, status: 401, errCode: "unauthorized"},
		{name: "token without Bearer", client: tc, method: "GET", url: base + "/v1/version",
			header: map[string]string{"Authorization": token}, status: 401, errCode: "unauthorized"},
		{name: "token with a suffix", client: tc, method: "GET", url: base + "/v1/version",
			header: map[string]string{"Authorization": "Bearer " + token + "x"}, status: 401, errCode: "unauthorized"},
		{name: "scheme is case-insensitive", client: tc, method: "GET", url: base + "/v1/version",
			header: map[string]string{"Authorization": "bearer " + token}, status: 200},
		{name: "right token", client: tc, method: "GET", url: base + "/v1/version", header: bearer, status: 200, validate: versionPID},
		{name: "health with token", client: tc, method: "GET", url: base + "/v1/health", header: bearer, status: 200},
		{name: "metrics without token", client: tc, method: "GET", url: base + "/v1/metrics", status: 401, errCode: "unauthorized"},
		{name: "bad host", client: tc, method: "GET", url: base + "/v1/version", header: bearer, host: "evil.example",
			status: 403, errCode: "forbidden_host"},
		{name: "bad host with loopback port", client: tc, method: "GET", url: base + "/v1/version", header: bearer,
			host: fmt.Sprintf("evil.example:%d", port), status: 403, errCode: "forbidden_host"},
		{name: "bad host on the socket", client: uc, method: "GET", url: "http://localhost/v1/version", host: "evil.example",
			status: 403, errCode: "forbidden_host"},
		{name: "host [::1]:port", client: tc, method: "GET", url: base + "/v1/version", header: bearer,
			host: fmt.Sprintf("[::1]:%d", port), status: 200, validate: versionPID},
		{name: "host localhost:port", client: tc, method: "GET", url: base + "/v1/version", header: bearer,
			host: fmt.Sprintf("localhost:%d", port), status: 200, validate: versionPID},
		{name: "origin", client: tc, method: "GET", url: base + "/v1/version", header: with("Origin", "http://localhost"),
			status: 403, errCode: "forbidden_origin"},
		{name: "origin on the socket", client: uc, method: "GET", url: "http://localhost/v1/version",
			header: map[string]string{"Origin": "null"}, status: 403, errCode: "forbidden_origin"},
		{name: "options", client: tc, method: "OPTIONS", url: base + "/v1/send", header: bearer, status: 403, errCode: "forbidden_method"},
		{name: "options on the socket", client: uc, method: "OPTIONS", url: "http://localhost/v1/send", status: 403, errCode: "forbidden_method"},
		{name: "token in query", client: tc, method: "GET", url: base + "/v1/version?token=x", header: bearer, status: 400, errCode: "token_in_query"},
		{name: "right token in query", client: tc, method: "GET", url: base + "/v1/version?token=" + token, status: 400, errCode: "token_in_query"},
		{name: "token in query on the socket", client: uc, method: "GET", url: "http://localhost/v1/version?token=x", status: 400, errCode: "token_in_query"},
		{name: "unknown path", client: tc, method: "GET", url: base + "/v1/nope", header: bearer, status: 404, errCode: "not_found"},
		{name: "unknown path on the socket", client: uc, method: "GET", url: "http://localhost/nope", status: 404, errCode: "not_found"},
		{name: "wrong method", client: tc, method: "DELETE", url: base + "/v1/send", header: bearer, status: 405, errCode: "method_not_allowed",
			validate: allowIs("POST")},
		{name: "GET on send", client: uc, method: "GET", url: "http://localhost/v1/send", status: 405, errCode: "method_not_allowed",
			validate: allowIs("POST")},
		{name: "POST on version", client: uc, method: "POST", url: "http://localhost/v1/version", body: []byte(`{}`),
			status: 405, errCode: "method_not_allowed", validate: allowIs("GET")},
		{name: "GET on requeue", client: tc, method: "GET", url: base + "/v1/outbox/requeue", header: bearer,
			status: 405, errCode: "method_not_allowed", validate: allowIs("POST")},
		{name: "send over TCP", client: tc, method: "POST", url: base + "/v1/send", header: bearer,
			body: []byte(`{"to":"@ops","message":"over tcp","client_message_id":"tcp-1"}`), status: 202,
			validate: func(t *testing.T, r *response) {
				if m := r.json(t); str(m, "status") != "queued" || str(m, "client_message_id") != "tcp-1" {
					t.Errorf("202 body %s", r.body)
				}
			}},
		{name: "send over TCP without token", client: tc, method: "POST", url: base + "/v1/send",
			body: []byte(`{"to":"@ops","message":"no token","client_message_id":"tcp-unauth"}`), status: 401, errCode: "unauthorized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, tc.method, tc.url, tc.body)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			r := do(t, tc.client, req)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			m := r.json(t)
			if tc.errCode != "" && str(m, "error") != tc.errCode {
				t.Errorf("error %q, want %q: %s", str(m, "error"), tc.errCode, r.body)
			}
			if tc.errCode == "" && m["error"] != nil {
				t.Errorf("a %d answer carries an error: %s", r.status, r.body)
			}
			if tc.validate != nil {
				tc.validate(t, r)
			}
		})
	}
	// GET /v1/metrics, with the token, answers the Prometheus text format.
	req := newRequest(t, "GET", base+"/v1/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if r := do(t, tc, req); r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") ||
		!strings.Contains(string(r.body), `cm_daemon_ipc_requests_total{endpoint="/v1/metrics",status="401",transport="tcp"} 1`) {
		t.Errorf("GET /v1/metrics over TCP: %d %q\n%s", r.status, r.header.Get("Content-Type"), r.body)
	}

	// Body limit: exactly 1 MiB passes the gate (and fails validation on
	// the message size); one byte more is payload_too_large, over both
	// transports, with and without a Content-Length.
	tcpAddr := fmt.Sprintf("127.0.0.1:%d", port)
	exact := paddedSend(t, "body-exact", maxBody)
	over := paddedSend(t, "body-over", maxBody+1)
	limits := []struct {
		name    string
		network string
		addr    string
		auth    bool
		body    []byte
		chunked bool
		status  int
		code    string
	}{
		{"tcp exact", "tcp", tcpAddr, true, exact, false, 413, "message_too_large"},
		{"tcp over", "tcp", tcpAddr, true, over, false, 413, "payload_too_large"},
		{"tcp over chunked", "tcp", tcpAddr, true, over, true, 413, "payload_too_large"},
		{"unix exact", "unix", e.socket(), false, exact, false, 413, "message_too_large"},
		{"unix over", "unix", e.socket(), false, over, false, 413, "payload_too_large"},
		{"unix over chunked", "unix", e.socket(), false, over, true, 413, "payload_too_large"},
	}
	for _, l := range limits {
		t.Run(l.name, func(t *testing.T) {
			hdr := http.Header{"Content-Type": {"application/json"}}
			if l.auth {
				hdr.Set("Authorization", "Bearer "+token)
			}
			r := rawPost(t, l.network, l.addr, "/v1/send", hdr, l.body, l.chunked)
			if r.status != l.status {
				t.Fatalf("status %d, want %d: %.200s", r.status, l.status, r.body)
			}
			if code := str(r.json(t), "error"); code != l.code {
				t.Errorf("error %q, want %q", code, l.code)
			}
		})
	}

	// Of all the above, only the authorized TCP send wrote a row.
	rows := listAll(t, uc, "")
	if len(rows) != 1 || rows[0].ClientMessageID != "tcp-1" {
		t.Errorf("outbox after the hygiene checks: %+v, want only tcp-1", rows)
	}
	checkRotateToken(t, e, base, token)
	d.stop()
	// With no daemon running, rotate-token replaces the file itself.
	before := readTrimmed(t, e, "local-token")
	if r := runCLI(t, e, "daemon", "rotate-token"); r.code != 0 || !strings.Contains(r.stdout, "no daemon is running") {
		t.Errorf("rotate-token without a daemon: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := readTrimmed(t, e, "local-token"); after == before || after == "" {
		t.Errorf("local-token after an offline rotation: %q (was %q)", after, before)
	}
}

// checkRotateToken: `daemon rotate-token` replaces local-token; the running
// daemon takes the new token at once and still the old one (its minute of
// grace); the route is refused over TCP.
func checkRotateToken(t *testing.T, e *env, base, old string) {
	t.Helper()
	r := runCLI(t, e, "daemon", "rotate-token")
	if r.code != 0 || !strings.Contains(r.stdout, "the previous token is accepted until") {
		t.Fatalf("daemon rotate-token: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fresh := readTrimmed(t, e, "local-token")
	if fresh == old || fresh == "" {
		t.Fatalf("local-token after the rotation: %q (was %q)", fresh, old)
	}
	tc := tcpClient()
	defer tc.CloseIdleConnections()
	for _, c := range []struct {
		method, path, token string
		status              int
	}{
		{http.MethodGet, "/v1/version", fresh, 200},
		{http.MethodGet, "/v1/version", old, 200},
		{http.MethodGet, "/v1/version", "not-a-token", 401},
		{http.MethodPost, "/v1/token/rotate", fresh, 403},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := tc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s with token %.8s…: %d, want %d", c.method, c.path, c.token, resp.StatusCode, c.status)
		}
	}
}

func allowIs(want string) func(t *testing.T, r *response) {
	return func(t *testing.T, r *response) {
		if got := r.header.Get("Allow"); got != want {
			t.Errorf("Allow %q, want %q", got, want)
		}
	}
}

// paddedSend is a valid /v1/send body of exactly n bytes (the message is
// padding, far above the message limit).
func paddedSend(t *testing.T, id string, n int) []byte {
	t.Helper()
	head := fmt.Sprintf(`{"to":"@ops","client_message_id":%q,"message":"`, id)
	tail := `"}`
	pad := n - len(head) - len(tail)
	if pad <= 0 {
		t.Fatal("n too small")
	}
	b := make([]byte, 0, n)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte("a"), pad)...)
	b = append(b, tail...)
	return b
}

// rawPost writes one HTTP/1.1 request on a fresh connection while reading
// the answer concurrently: a server that answers 413 early and closes does
// not let a client that insists on writing the whole body first see it.
func rawPost(t *testing.T, network, addr, path string, hdr http.Header, body []byte, chunked bool) *response {
	t.Helper()
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	req, err := http.NewRequest(http.MethodPost, "http://localhost"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr.Clone()
	if chunked {
		req.ContentLength = -1
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.TransferEncoding = []string{"chunked"}
	}
	go func() { _ = req.Write(conn) }() // the write fails once the server closes: expected
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer body: %v", err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}
