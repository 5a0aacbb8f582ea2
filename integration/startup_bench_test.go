package integration

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStartup measures the real binary from exec to the first answer
// of GET /v1/version on the socket, with an empty outbox and with 100,000
// pending rows, and the daemon's resident memory once it serves.
//
//	go test -run='^$' -bench=BenchmarkStartup -benchtime=20x ./integration/
func BenchmarkStartup(b *testing.B) {
	for _, rows := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", rows), func(b *testing.B) {
			dir, err := os.MkdirTemp("", "cmb")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			env := append(os.Environ(), "CLAUDEMESH_DAEMON_DIR="+filepath.Join(dir, "d"), "CLAUDEMESH_CONFIG_DIR="+filepath.Join(dir, "c"))
			sock := filepath.Join(dir, "d", "daemon.sock")
			startOnce(b, env, sock) // creates the identity and the schema
			if rows > 0 {
				fillOutbox(b, filepath.Join(dir, "d", "outbox.db"), rows)
			}
			var took []time.Duration
			var rss int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, r := startOnce(b, env, sock)
				took, rss = append(took, d), max(rss, r)
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(float64(rss)/1024, "rss-MB")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// startOnce starts a foreground daemon, times it until the socket answers,
// reads its RSS, stops it with SIGTERM and waits for it to exit.
func startOnce(b *testing.B, env []string, sock string) (time.Duration, int) {
	cmd := exec.Command(binPath, "daemon", "up", "--foreground", "--no-tcp", "--log-level", "warn")
	cmd.Env = env
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var took time.Duration
	for deadline := start.Add(10 * time.Second); ; {
		resp, err := c.Get("http://localhost/v1/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				took = time.Since(start)
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			b.Fatalf("daemon did not answer within 10s: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	c.CloseIdleConnections()
	rss := residentKB(cmd.Process.Pid)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		b.Fatalf("daemon exit: %v", err)
	}
	return took, rss
}

// residentKB reads VmRSS from /proc (0 where there is no /proc).
func residentKB(pid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// fillOutbox inserts rows pending rows of a realistic size.
func fillOutbox(b *testing.B, path string, rows int) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	stmt, err := tx.Prepare(`INSERT INTO outbox (id, client_message_id, mesh, request_fingerprint, payload, enqueued_at, next_attempt_at)
		VALUES (?, ?, 'local', ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"type":"send","targetSpec":"#bench","ciphertext":"` + strings.Repeat("A", 300) + `"}`)
	fp := make([]byte, 32)
	now := time.Now().UnixMilli()
	for i := 0; i < rows; i++ {
		if _, err := stmt.Exec(fmt.Sprintf("row-%09d", i), fmt.Sprintf("fill-%d", i), fp, payload, now, now); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
