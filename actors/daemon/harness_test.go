package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/actors/daemon"
	"github.com/claudemesh/claudemesh-go/config"
)

// harness is a real daemon started in-process on a temp directory: real
// SQLite files, the real actor tree, the real Unix socket. Tests talk to it
// over the socket and move outbox rows between states with a second SQLite
// connection, as the dispatcher will.
type harness struct {
	t      testing.TB
	d      *daemon.Daemon
	paths  config.Paths
	hc     *http.Client
	db     *sqlx.DB
	pubkey string
}

func startDaemon(t testing.TB) *harness {
	t.Helper()
	return startDaemonWith(t, func(*config.File) {})
}

// startDaemonWith is startDaemon with config.toml's settings changed by set.
func startDaemonWith(t testing.TB, set func(*config.File)) *harness {
	t.Helper()
	dir, err := os.MkdirTemp("", "cmd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	paths := config.Paths{DaemonDir: filepath.Join(dir, "d"), ConfigDir: filepath.Join(dir, "c")}
	writeOfflineMesh(t, paths)
	cfg := config.DefaultFile()
	cfg.IPC.TCPEnabled = false
	set(&cfg)
	d, err := daemon.Start(daemon.Options{Paths: paths, Config: cfg, Version: "test",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	h := &harness{t: t, d: d, paths: paths, hc: unixClient(paths.Socket(), 64)}
	h.db = sqlx.MustOpen("sqlite", "file:"+paths.OutboxDB()+"?_pragma=busy_timeout(5000)")
	t.Cleanup(func() { h.db.Close() })
	meshes, err := paths.LoadMemberships()
	if err != nil || len(meshes) != 1 {
		t.Fatalf("memberships: %v %v", meshes, err)
	}
	h.pubkey = meshes[0].Pubkey
	return h
}

func unixClient(sock string, conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// post sends body to path with optional header pairs and decodes the answer.
func (h *harness) post(path, body string, header ...string) (int, map[string]any) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://localhost"+path, bytes.NewBufferString(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return h.do(req)
}

func (h *harness) get(path string) (int, map[string]any) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://localhost"+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.do(req)
}

func (h *harness) do(req *http.Request) (int, map[string]any) {
	resp, err := h.hc.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		h.t.Fatalf("%s %s: answer is not JSON: %v", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, out
}

// rows counts outbox rows matching where.
func (h *harness) rows(where string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.db.Get(&n, "SELECT COUNT(*) FROM outbox WHERE "+where, args...); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) exec(query string, args ...any) {
	h.t.Helper()
	if _, err := h.db.Exec(query, args...); err != nil {
		h.t.Fatal(err)
	}
}

// writeOfflineMesh records a `local` membership whose broker never answers
// (nothing listens on port 1): accepted rows stay pending, and the tests
// of the accept path move them between states themselves.
func writeOfflineMesh(t testing.TB, paths config.Paths) {
	t.Helper()
	m, err := config.NewMembership(config.LocalMeshSlug, "ws://127.0.0.1:1/ws")
	if err == nil {
		_, err = paths.AddMembership(m)
	}
	if err != nil {
		t.Fatal(err)
	}
}
