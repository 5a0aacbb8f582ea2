package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// stopWait bounds how long a command waits for the daemon to act on a
// SIGHUP.
const stopWait = 5 * time.Second

// downWait bounds how long `daemon down` waits for the process to exit: more
// than a stop can take (daemon.DrainTimeout for running requests, the
// actors' drain, daemon.ReleaseTimeout for the inflight rows).
const downWait = 10 * time.Second

type daemonDownCmd struct{}

// Run sends SIGTERM to the pid the daemon reports over its socket (never
// the pid file, which may name a recycled pid) and waits for it to exit.
func (c *daemonDownCmd) Run() error {
	client, err := daemonClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := client.Version(ctx)
	if errors.Is(err, ipc.ErrDaemonNotRunning) {
		fmt.Println("daemon not running")
		return nil
	}
	if err != nil {
		return err
	}
	if err := syscall.Kill(v.PID, syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal daemon (pid %d): %w", v.PID, err)
	}
	deadline := time.Now().Add(downWait)
	for processAlive(v.PID) {
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon (pid %d) still running %s after SIGTERM; if it is stuck, `kill -9 %d` is safe: the outbox recovers at the next start",
				v.PID, downWait, v.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("daemon stopped (pid %d)\n", v.PID)
	return nil
}

// httpPort is the port in http.port, which a running daemon writes when it
// binds its TCP listener and removes when TCP is off.
func httpPort(paths config.Paths) (int, bool) {
	b, err := os.ReadFile(paths.HTTPPort())
	if err != nil {
		return 0, false
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return port, err == nil && port > 0
}

// processAlive reports whether pid is a running process (EPERM: it runs,
// not as us). An exited process its parent has not reaped yet (a zombie,
// state Z in /proc) has stopped.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc (macOS): kill(0) is all we have
	}
	// The state follows the parenthesised command name, which may contain spaces.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

type daemonAcceptHostCmd struct{}

// Run records this machine in host_fingerprint.json, so that the next
// `daemon up` starts under clone policy "refuse".
func (c *daemonAcceptHostCmd) Run() error {
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := paths.EnsureDaemonDir(); err != nil {
		return err
	}
	h := config.CurrentHost()
	if err := paths.RecordHost(h); err != nil {
		return err
	}
	fmt.Printf("recorded host %q (fingerprint %.16s…) in %s\n", h.HostID, h.Fingerprint, paths.HostFile())
	return nil
}

type daemonMetricsCmd struct{}

func (c *daemonMetricsCmd) Run() error {
	client, err := daemonClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	text, err := client.Metrics(ctx) // ipc.ErrDaemonNotRunning says how to start one
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(text)
	return err
}

type daemonAddAgentCmd struct {
	Name string `arg:"" help:"The agent's name, used as its mesh slug (--mesh, \"mesh\" in requests): 1-64 of a-z, 0-9, _ and -."`
}

// Run records a new member of the local mesh in config.json; a running
// daemon is sent SIGHUP and attaches it at once.
func (c *daemonAddAgentCmd) Run() error {
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	have, err := paths.EnsureMemberships()
	if err != nil {
		return err
	}
	agent, err := config.NewLocalAgent(c.Name, have)
	if err != nil {
		return usageErr("%v", err)
	}
	if _, err := paths.AddMembership(agent); err != nil {
		return usageErr("%v", err)
	}
	fmt.Printf("added agent %s on the local mesh, pubkey %s\n", agent.Slug, agent.Pubkey)
	pid, err := attachToRunning(paths, agent.Slug)
	if pid != 0 && err == nil {
		fmt.Printf("the running daemon (pid %d) serves it\n", pid)
	}
	return err
}

// attachToRunning has a running daemon attach the membership slug that was
// just recorded: it sends SIGHUP and waits until the daemon serves it. pid
// is 0 when no daemon answers (it attaches the membership when it starts).
func attachToRunning(paths config.Paths, slug string) (pid int, err error) {
	v, err := ipc.ProbeOurs(paths.Socket())
	if err != nil {
		return 0, nil
	}
	if err := syscall.Kill(v.PID, syscall.SIGHUP); err != nil {
		return v.PID, fmt.Errorf("tell the running daemon (pid %d) to attach %s: %w; restart it instead", v.PID, slug, err)
	}
	if afterHUP(paths, stopWait, func(now *messages.Version) bool {
		return slices.ContainsFunc(now.Meshes, func(m messages.MeshInfo) bool { return m.Mesh == slug })
	}) == nil {
		return v.PID, fmt.Errorf("the running daemon (pid %d) did not attach %s within %s (see its log); restart it to attach it", v.PID, slug, stopWait)
	}
	return v.PID, nil
}

// afterHUP polls the daemon's GET /v1/version (every 20 ms, at most within)
// until done says the SIGHUP it was sent has taken effect, and returns that
// answer (nil if it never did).
func afterHUP(paths config.Paths, within time.Duration, done func(*messages.Version) bool) *messages.Version {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if now, err := ipc.ProbeOurs(paths.Socket()); err == nil && done(now) {
			return now
		}
	}
	return nil
}

type daemonReloadCmd struct{}

// Run sends SIGHUP to the running daemon (the pid its socket reports) and
// waits for the outcome, which GET /v1/version reports: config.toml applied,
// or refused with the reason (the daemon then keeps its settings).
func (c *daemonReloadCmd) Run() error {
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	v, err := ipc.ProbeOurs(paths.Socket())
	if err != nil {
		return ipc.ErrDaemonNotRunning
	}
	before := 0
	if v.Reload != nil {
		before = v.Reload.Seq
	}
	if err := syscall.Kill(v.PID, syscall.SIGHUP); err != nil {
		return fmt.Errorf("signal daemon (pid %d): %w", v.PID, err)
	}
	now := afterHUP(paths, stopWait, func(now *messages.Version) bool { return now.Reload != nil && now.Reload.Seq > before })
	switch {
	case now == nil:
		return fmt.Errorf("the daemon (pid %d) did not report the reload within %s; see its log", v.PID, stopWait)
	case !now.Reload.OK:
		return fmt.Errorf("the daemon (pid %d) kept its settings: %s", v.PID, now.Reload.Error)
	}
	fmt.Printf("reloaded (pid %d)\n", v.PID)
	return nil
}

type daemonRotateTokenCmd struct{}

// Run has the running daemon mint a new bearer token (it keeps accepting
// the old one for a minute); with no daemon running it replaces local-token
// itself.
func (c *daemonRotateTokenCmd) Run() error {
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := ipc.NewClient(paths.Socket()).RotateToken(ctx)
	if errors.Is(err, ipc.ErrDaemonNotRunning) {
		if err := paths.EnsureDaemonDir(); err != nil {
			return err
		}
		if _, err := paths.RotateLocalToken(); err != nil {
			return err
		}
		fmt.Printf("rotated %s (no daemon is running; the next one uses the new token)\n", paths.TokenFile())
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("rotated %s; the previous token is accepted until %s\n", paths.TokenFile(), stamp(res.PreviousValidUntil))
	return nil
}
