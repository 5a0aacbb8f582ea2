package ipcserver

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestRotateToken: POST /v1/token/rotate is refused over TCP and served
// over the Unix socket; the new token works at once, the old one for
// TokenGrace more and then no longer, and only the one token before the
// current is ever honoured. A failed rotation changes nothing.
func TestRotateToken(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	minted := []string{"token-2", "token-3"}
	var failNext bool
	h := newHarness(t, func(_ *harness, o *Options) {
		o.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		o.RotateToken = func() (string, error) {
			mu.Lock()
			defer mu.Unlock()
			if failNext {
				return "", errors.New("disk full")
			}
			tok := minted[0]
			minted = minted[1:]
			return tok, nil
		}
	})
	sock := filepath.Join(t.TempDir(), "d.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go h.srv.Serve(ul)
	unix := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer unix.CloseIdleConnections()
	rotate := func() *http.Response {
		t.Helper()
		resp, err := unix.Post("http://localhost/v1/token/rotate", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	status := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, h.base+"/v1/version", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	if resp := h.do(http.MethodPost, "/v1/token/rotate", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("rotate over TCP: %d, want 403", resp.StatusCode)
	}
	if resp := rotate(); resp.StatusCode != http.StatusOK {
		t.Fatalf("rotate over the socket: %d", resp.StatusCode)
	}
	for tok, want := range map[string]int{"token-2": 200, testToken: 200, "token-3": 401} {
		if got := status(tok); got != want {
			t.Errorf("just after the rotation, %s: %d, want %d", tok, got, want)
		}
	}
	advance(TokenGrace - time.Second)
	if got := status(testToken); got != http.StatusOK {
		t.Errorf("the old token a second before its grace ends: %d", got)
	}
	advance(time.Second)
	if got := status(testToken); got != http.StatusUnauthorized {
		t.Errorf("the old token once its grace ended: %d, want 401", got)
	}
	rotate()
	for tok, want := range map[string]int{"token-3": 200, "token-2": 200, testToken: 401} {
		if got := status(tok); got != want {
			t.Errorf("after the second rotation, %s: %d, want %d", tok, got, want)
		}
	}
	mu.Lock()
	failNext = true
	mu.Unlock()
	if resp := rotate(); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("a failed rotation: %d, want 500", resp.StatusCode)
	}
	if got := status("token-3"); got != http.StatusOK {
		t.Errorf("after a failed rotation the current token: %d", got)
	}
	var m dto.Metric
	if err := h.srv.metrics.TokenRotations.Write(&m); err != nil || m.GetCounter().GetValue() != 2 {
		t.Errorf("cm_daemon_local_token_rotations_total = %v (%v), want 2", m.GetCounter().GetValue(), err)
	}
	var v struct {
		Features []string `json:"ipc_features"`
	}
	resp, err := unix.Get("http://localhost/v1/version")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil || !slices.Contains(v.Features, "token_rotate") {
		t.Errorf("GET /v1/version advertises %v, without token_rotate", v.Features)
	}
}
