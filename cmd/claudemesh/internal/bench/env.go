package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/config"
)

// startTimeout bounds the start of each process of a self-contained run.
const startTimeout = 15 * time.Second

// Env is a self-contained run's processes in a temporary directory: a
// broker (unless the mode needs none) and daemons, each started from the
// claudemesh binary with its own directories.
type Env struct {
	bin    string
	dir    string
	procs  []*exec.Cmd
	broker string // host:port
	// fsyncMode is the daemons' [outbox] fsync_mode ("": their default).
	fsyncMode string
	legacy    bool // the daemons' [features] legacy_broker
	// profileDir, when set, is where each process writes its CPU profile.
	profileDir string
	// Peers are the members, in join order ("alice", "bob").
	Peers []*Peer
}

// Peer is one member of a self-contained mesh.
type Peer struct {
	Name       string
	Membership config.Membership
	Socket     string // its daemon's socket ("" when no daemon runs)
	env        []string
	daemon     *exec.Cmd // its daemon, while it runs
}

// StartEnv starts what mode needs, from the claudemesh binary bin:
// accept and startup — one daemon whose mesh has no reachable broker
// (accepts are measured alone); e2e — a broker and the daemons of alice and bob; broker
// — a broker with alice and bob joined, no daemon. The broker keeps its
// data in the temporary directory (SQLite), or with databaseURL on that
// PostgreSQL database (in a mesh of its own). The daemons run with
// opts.FsyncMode. Close removes it all.
func StartEnv(ctx context.Context, bin string, opts Options, databaseURL string) (_ *Env, err error) {
	mode := opts.Mode
	if mode == ModeStartup {
		mode = ModeAccept // the same daemon, its broker out of reach
	}
	dir, err := os.MkdirTemp("", "cmbench")
	if err != nil {
		return nil, err
	}
	e := &Env{bin: bin, dir: dir, fsyncMode: opts.FsyncMode, legacy: opts.LegacyBroker, profileDir: opts.ProfileDir}
	store := []string{"--dir", filepath.Join(dir, "broker")}
	if databaseURL != "" {
		store = []string{"--database-url", databaseURL}
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if mode == ModeSessions {
		return e, e.startSessionsEnv(ctx)
	}
	if mode == ModeAccept {
		p := e.peer("alice")
		m, err := config.NewMembership(config.LocalMeshSlug, "ws://127.0.0.1:1/ws") // nothing answers: rows stay pending
		if err == nil {
			_, err = config.Paths{ConfigDir: filepath.Join(e.dir, p.Name, "c")}.AddMembership(m)
		}
		if err != nil {
			return nil, err
		}
		p.Membership = m
		return e, e.startDaemon(ctx, p, false)
	}
	if err := e.startBroker(ctx, store, brokerLimits(opts)); err != nil {
		return nil, err
	}
	slug := "bench-" + strings.ToLower(ulid.Make().String()) // a database may be shared between runs
	if _, err := e.cli(ctx, nil, append([]string{"broker", "mesh", "create", slug}, store...)...); err != nil {
		return nil, err
	}
	out, err := e.cli(ctx, nil, append([]string{"broker", "invite", slug, "--uses", "2", "--broker-url", "http://" + e.broker}, store...)...)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, name := range []string{"alice", "bob"} {
		p := e.peer(name)
		if _, err := e.cli(ctx, p.env, "join", lines[len(lines)-1], "--name", name); err != nil {
			return nil, err
		}
		ms, err := config.Paths{ConfigDir: filepath.Join(e.dir, name, "c")}.LoadMemberships()
		if err != nil || len(ms) != 1 {
			return nil, fmt.Errorf("bench: %s's memberships after join: %v %v", name, ms, err)
		}
		p.Membership = ms[0]
		if mode == ModeE2E || mode == ModeBacklog {
			if err := e.startDaemon(ctx, p, true); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

// Close stops the processes (SIGTERM, then waits) and removes the directory.
func (e *Env) Close() {
	for _, p := range e.Peers {
		_ = e.stop(p)
	}
	for _, p := range e.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range e.procs {
		_ = p.Wait()
	}
	os.RemoveAll(e.dir)
}

// cpuClock reads the CPU time of the run's processes: the broker and each
// running daemon, by name.
func (e *Env) cpuClock() cpuClock {
	c := cpuClock{pids: map[string]int{}}
	if e.broker != "" && len(e.procs) > 0 {
		c.pids["broker"] = e.procs[0].Process.Pid
	}
	for _, p := range e.Peers {
		if p.daemon != nil {
			c.pids[p.Name] = p.daemon.Process.Pid
		}
	}
	return c
}

func (e *Env) peer(name string) *Peer {
	p := &Peer{Name: name, env: append(e.profiled(name), config.EnvDaemonDir+"="+filepath.Join(e.dir, name, "d"),
		config.EnvConfigDir+"="+filepath.Join(e.dir, name, "c"))}
	e.Peers = append(e.Peers, p)
	return p
}

// cli runs one claudemesh command and returns its stdout.
func (e *Env) cli(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = env
	if env == nil {
		cmd.Env = os.Environ()
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bench: claudemesh %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

var listening = regexp.MustCompile(`broker listening on (\S+) `)

// brokerLimits are the broker's rate flags: a backlog run's limit, else
// one far above what is measured (delivery, not the rate budget).
func brokerLimits(opts Options) []string {
	if opts.Mode != ModeBacklog {
		return []string{"--rate-limit", "1000000000"}
	}
	args := []string{"--rate-limit", strconv.Itoa(opts.RateLimit), "--rate-window", opts.RateWindow.String()}
	if opts.LegacyBroker {
		args = append(args, "--legacy-protocol")
	}
	if opts.Concurrent > 0 {
		args = append(args, "--legacy-concurrent", opts.Concurrent.String())
	}
	return args
}

// profiled is the environment of a process named name: this one's, and
// where to write its CPU profile when the run profiles.
func (e *Env) profiled(name string) []string {
	env := os.Environ()
	if e.profileDir != "" {
		env = append(env, config.EnvCPUProfile+"="+filepath.Join(e.profileDir, name+".pprof"))
	}
	return env
}

func (e *Env) startBroker(ctx context.Context, store, limits []string) error {
	cmd := exec.Command(e.bin, append(append([]string{"broker", "up", "--listen", "127.0.0.1:0", "--log-level", "warn"},
		limits...), store...)...)
	cmd.Env = e.profiled("broker")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start broker: %w", err)
	}
	e.procs = append(e.procs, cmd)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if g := listening.FindStringSubmatch(sc.Text()); g != nil {
				found <- g[1]
				break
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case e.broker = <-found:
		return nil
	case <-time.After(startTimeout):
		return errors.New("bench: the broker never said where it listens")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startDaemon starts p's daemon in the foreground (socket only) and waits
// until it answers, and with connected until its broker connection is up.
func (e *Env) startDaemon(ctx context.Context, p *Peer, connected bool) error {
	if e.fsyncMode != "" || e.legacy {
		dir := filepath.Join(e.dir, p.Name, "d")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		toml := fmt.Sprintf("[features]\nlegacy_broker = %t\n", e.legacy)
		if e.fsyncMode != "" {
			toml += fmt.Sprintf("[outbox]\nfsync_mode = %q\n", e.fsyncMode)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(toml), 0o600); err != nil {
			return err
		}
	}
	cmd := exec.Command(e.bin, "daemon", "up", "--foreground", "--no-tcp", "--log-level", "warn")
	cmd.Env = p.env
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench: start %s's daemon: %w", p.Name, err)
	}
	p.daemon = cmd
	p.Socket = filepath.Join(e.dir, p.Name, "d", "daemon.sock")
	c := unixClient(p.Socket, 1)
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(startTimeout)
	for {
		if up, err := daemonUp(c, connected); up {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s's daemon not ready after %s: %v", p.Name, startTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // poll interval; the condition is re-checked
		}
	}
}

// daemonUp reports whether the daemon answers GET /v1/health, and with
// connected whether every mesh is connected.
func daemonUp(c *http.Client, connected bool) (bool, error) {
	resp, err := c.Get("http://localhost/v1/health")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var h struct {
		Meshes []struct {
			Connected bool `json:"connected"`
		} `json:"meshes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return false, err
	}
	if !connected {
		return true, nil
	}
	for _, m := range h.Meshes {
		if !m.Connected {
			return false, errors.New("not connected to the broker yet")
		}
	}
	return len(h.Meshes) > 0, nil
}

// unixClient is an HTTP client over the Unix socket sock with up to conns
// connections.
func unixClient(sock string, conns int) *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) }}}
}
