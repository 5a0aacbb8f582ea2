package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkE2E measures delivery through real processes: a broker on
// SQLite and two daemons, alice → broker → bob, each message timed from
// alice's POST /v1/send to its `message` event on bob's /v1/events.
//
//	go test -run='^$' -bench=BenchmarkE2E -benchtime=10000x ./integration/
//
// "paced" offers 1,000 msgs/s and reports the latency percentiles;
// "throughput" sends as fast as 64 clients can and reports delivered
// msgs/s. Both check that every message arrived exactly once.
func BenchmarkE2E(b *testing.B) {
	for _, mode := range []struct {
		name string
		rate int
	}{{"paced", 1000}, {"throughput", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			m := startMesh(b)
			lat := m.run(b, b.N, mode.rate)
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchMesh is a broker process and two daemon processes joined to it.
type benchMesh struct {
	procs    []*exec.Cmd
	alice    *http.Client
	bob      *http.Client
	bobKey   string
	dir      string
	arrivals sync.Map // client_message_id → time.Time
	dups     atomic.Int64
}

func startMesh(b *testing.B) *benchMesh {
	dir, err := os.MkdirTemp("", "cme2e")
	if err != nil {
		b.Fatal(err)
	}
	m := &benchMesh{dir: dir}
	b.Cleanup(func() {
		for _, p := range m.procs {
			p.Process.Signal(syscall.SIGTERM)
			p.Wait()
		}
		os.RemoveAll(dir)
	})
	env := func(who string) []string {
		return append(os.Environ(), "CLAUDEMESH_DAEMON_DIR="+filepath.Join(dir, who, "d"), "CLAUDEMESH_CONFIG_DIR="+filepath.Join(dir, who, "c"))
	}
	run := func(who string, args ...string) string {
		cmd := exec.Command(binPath, args...)
		cmd.Env = env(who)
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("claudemesh %v: %v", args, err)
		}
		return string(out)
	}
	addr := m.startBroker(b, filepath.Join(dir, "broker"), env("broker"))
	run("broker", "broker", "mesh", "create", "bench", "--dir", filepath.Join(dir, "broker"))
	lines := strings.Split(strings.TrimSpace(run("broker", "broker", "invite", "bench", "--uses", "2", "--dir",
		filepath.Join(dir, "broker"), "--broker-url", "http://"+addr)), "\n")
	for _, who := range []string{"alice", "bob"} {
		run(who, "join", lines[len(lines)-1], "--name", who)
		m.startDaemon(b, env(who), filepath.Join(dir, who, "d", "daemon.sock"))
	}
	m.alice = sockClient(filepath.Join(dir, "alice", "d", "daemon.sock"))
	m.bob = sockClient(filepath.Join(dir, "bob", "d", "daemon.sock"))
	var cfg struct {
		Meshes []struct{ Pubkey string } `json:"meshes"`
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "bob", "c", "config.json"))
	if err := json.Unmarshal(raw, &cfg); err != nil || len(cfg.Meshes) != 1 {
		b.Fatalf("bob's config.json: %v", err)
	}
	m.bobKey = cfg.Meshes[0].Pubkey
	m.listen(b)
	return m
}

func (m *benchMesh) startBroker(b *testing.B, dir string, env []string) string {
	cmd := exec.Command(binPath, "broker", "up", "--listen", "127.0.0.1:0", "--dir", dir, "--log-level", "warn",
		"--rate-limit", "10000000") // measure delivery, not the default budget of 6,000 a minute
	cmd.Env = env
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	m.procs = append(m.procs, cmd)
	re := regexp.MustCompile(`broker listening on (\S+) `)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if g := re.FindStringSubmatch(sc.Text()); g != nil {
			go io.Copy(io.Discard, stderr)
			return g[1]
		}
	}
	b.Fatal("the broker never said where it listens")
	return ""
}

func (m *benchMesh) startDaemon(b *testing.B, env []string, sock string) {
	cmd := exec.Command(binPath, "daemon", "up", "--foreground", "--no-tcp", "--log-level", "warn")
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	m.procs = append(m.procs, cmd)
	c := sockClient(sock)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if resp, err := c.Get("http://localhost/v1/health"); err == nil {
			var h struct {
				Meshes []struct{ Connected bool } `json:"meshes"`
			}
			json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if len(h.Meshes) == 1 && h.Meshes[0].Connected {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("a daemon did not connect to the broker within 10 s")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

func sockClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
}

// listen records when each message event arrives on bob's stream.
func (m *benchMesh) listen(b *testing.B) {
	resp, err := m.bob.Get("http://localhost/v1/events")
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("bob's /v1/events: %v", err)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct {
				ClientMessageID string `json:"client_message_id"`
			}
			if json.Unmarshal([]byte(data), &ev) == nil && ev.ClientMessageID != "" {
				if _, dup := m.arrivals.LoadOrStore(ev.ClientMessageID, time.Now()); dup {
					m.dups.Add(1)
				}
			}
		}
	}()
}

// run sends n DMs from alice to bob (paced at rate per second, or as fast
// as 64 clients go when rate is 0) and returns each one's latency.
func (m *benchMesh) run(b *testing.B, n, rate int) []time.Duration {
	sent := make([]time.Time, n)
	runID := fmt.Sprint(time.Now().UnixNano())
	var next atomic.Int64
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
				}
				body := fmt.Sprintf(`{"to":%q,"message":"benchmark %d","client_message_id":"e2e-%s-%d"}`, m.bobKey, i, runID, i)
				sent[i] = time.Now()
				resp, err := m.alice.Post("http://localhost/v1/send", "application/json", bytes.NewBufferString(body))
				if err != nil || resp.StatusCode != http.StatusAccepted {
					b.Errorf("send %d: %v", i, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	lat := make([]time.Duration, n)
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("e2e-%s-%d", runID, i)
		for {
			if at, ok := m.arrivals.Load(id); ok {
				lat[i] = at.(time.Time).Sub(sent[i])
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("message %d never reached bob (lost)", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "delivered/s")
	if d := m.dups.Load(); d > 0 {
		b.Fatalf("%d duplicate deliveries", d)
	}
	return lat
}
