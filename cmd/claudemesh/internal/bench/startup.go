package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ModeStartup times the daemon's start: exec to the first answer of GET
// /v1/version on its socket, Count times, with Pending rows waiting in its
// outbox; the report's latencies are those start times, and RSSMB the
// largest resident memory once serving. It is self-contained only.
const ModeStartup = "startup"

// runStartup fills alice's outbox through POST /v1/send (her mesh has no
// reachable broker, so the rows stay pending), stops her daemon, then starts
// and stops it opts.Count times.
func runStartup(ctx context.Context, opts Options, e *Env) (*Report, error) {
	if opts.Count <= 0 {
		return nil, errors.New("bench: startup needs a count of starts")
	}
	alice := e.Peers[0]
	if opts.Pending > 0 {
		fill := Options{Mode: ModeAccept, Clients: max(opts.Clients, 1), Count: opts.Pending, Size: opts.Size}
		s := newDaemonSender(Target{Socket: alice.Socket, To: DefaultTo}, fill.Clients)
		rep, err := run(ctx, fill, "fill", s, nil)
		s.hc.CloseIdleConnections()
		if err != nil {
			return nil, err
		}
		if rep.Delivered != opts.Pending {
			return nil, fmt.Errorf("bench: filling the outbox: %d of %d sends accepted (%v)", rep.Delivered, opts.Pending, rep.Errors)
		}
	}
	if err := e.stop(alice); err != nil {
		return nil, err
	}
	r := &recorder{errors: map[string]int{}}
	rss := 0
	start := time.Now()
	for range opts.Count {
		took, kb, err := e.timeStart(ctx, alice)
		if err != nil {
			return nil, err
		}
		r.done(took)
		rss = max(rss, kb)
	}
	elapsed := time.Since(start)
	return &Report{Mode: ModeStartup, Clients: opts.Clients, Size: opts.Size, Sent: opts.Count, Delivered: opts.Count,
		Pending: opts.Pending, ElapsedS: elapsed.Seconds(), Throughput: float64(opts.Count) / elapsed.Seconds(),
		LatencyMs: percentiles(r.latencies), RSSMB: float64(rss) / 1024, Errors: r.errors}, nil
}

// stop ends p's daemon with SIGTERM and waits for it.
func (e *Env) stop(p *Peer) error {
	cmd := p.daemon
	if cmd == nil {
		return nil
	}
	p.daemon = nil
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("bench: %s's daemon exit: %w", p.Name, err)
	}
	return nil
}

// timeStart starts p's daemon, times it until its socket answers GET
// /v1/version, reads its resident memory (kB; 0 without /proc) and stops
// it.
func (e *Env) timeStart(ctx context.Context, p *Peer) (time.Duration, int, error) {
	cmd := exec.Command(e.bin, "daemon", "up", "--foreground", "--no-tcp", "--log-level", "warn")
	cmd.Env = p.env
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	p.daemon = cmd
	c := unixClient(p.Socket, 1)
	defer c.CloseIdleConnections()
	for deadline := start.Add(startTimeout); ; {
		resp, err := c.Get("http://localhost/v1/version")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			cmd.Process.Kill()
			cmd.Wait()
			p.daemon = nil
			return 0, 0, fmt.Errorf("bench: %s's daemon did not answer within %s: %v", p.Name, startTimeout, err)
		}
		time.Sleep(time.Millisecond) // poll interval: the start is timed to the first answer
	}
	took := time.Since(start)
	kb := residentKB(cmd.Process.Pid)
	return took, kb, e.stop(p)
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
