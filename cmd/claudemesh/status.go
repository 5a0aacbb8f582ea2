package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

type daemonStatusCmd struct {
	JSON bool `name:"json" help:"Print one JSON object."`
}

// statusCmd is `claudemesh status`: `daemon status`, then the agent
// sessions as `claudemesh sessions` lists them.
type statusCmd struct {
	JSON bool `name:"json" help:"Print one JSON object (daemon status's, with the sessions)."`
}

type statusReport struct {
	Running bool   `json:"running"`
	Socket  string `json:"socket"`
	// TCPPort is the loopback port of the bearer-token listener (from
	// http.port), 0 when TCP is off.
	TCPPort int              `json:"tcp_port"`
	Health  *messages.Health `json:"health"`
	// LiveSessions counts the agent sessions registered (the daemon ends
	// one whose process is gone); absent when the daemon did not say.
	LiveSessions *int `json:"live_sessions,omitempty"`
	// Sessions are those sessions (`claudemesh status` only).
	Sessions []messages.SessionInfo `json:"sessions,omitempty"`
}

func (c *daemonStatusCmd) Run() error { return runStatus(c.JSON, false) }

func (c *statusCmd) Run() error { return runStatus(c.JSON, true) }

// runStatus asks the daemon on the socket what it is, its health and its
// sessions, and prints them; withSessions lists the sessions too. An
// upstream daemon's status is what its API says (upstreamStatus). Exit 1
// when no daemon answers.
func runStatus(asJSON, withSessions bool) error {
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	client := ipc.NewClient(paths.Socket())
	r := statusReport{Socket: paths.Socket()}
	v, err := client.Version(ctx)
	if err == nil {
		var d *ipc.Daemon
		if d, err = client.Identify(ctx, v); err == nil && d.Kind == ipc.DaemonUpstream {
			return upstreamStatus(ctx, client, v, d, paths.Socket(), asJSON)
		}
	}
	if err == nil {
		r.Health, err = client.Health(ctx)
	}
	switch {
	case errors.Is(err, ipc.ErrDaemonNotRunning):
		r.Health = nil
	case err != nil:
		return err
	default:
		r.Running = true
		r.TCPPort, _ = httpPort(paths)
		if sessions, err := client.Sessions(ctx); err == nil { // a daemon without sessions (upstream's) does not say
			n := len(sessions)
			r.LiveSessions = &n
			if withSessions {
				r.Sessions = sessions
			}
		}
	}
	if asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(&r); err != nil {
			return err
		}
	} else if r.Running {
		printStatus(&r)
		if withSessions && len(r.Sessions) > 0 {
			fmt.Println()
			if err := printSessions(r.Sessions, false); err != nil {
				return err
			}
		}
	}
	if !r.Running {
		return &exitError{code: 1, err: errors.New("daemon not running — start it with `claudemesh daemon up`")}
	}
	return nil
}

func printStatus(r *statusReport) {
	h := r.Health
	fmt.Printf("daemon: running, pid %d, up %s, version %s, schema %d\n", h.PID,
		(time.Duration(h.UptimeS) * time.Second).String(), h.DaemonVersion, h.SchemaVersion)
	fmt.Printf("socket: %s\n", r.Socket)
	if r.TCPPort != 0 {
		fmt.Printf("tcp: loopback port %d (from http.port; bearer token in local-token)\n", r.TCPPort)
	} else {
		fmt.Println("tcp: off (the Unix socket only)")
	}
	if h.FsyncMode != "" && h.FsyncMode != "strict" {
		fmt.Printf("outbox fsync_mode: %s (a power cut can take back sends answered 202 since the last fsync)\n", h.FsyncMode)
	}
	if h.DiskPressure != "" && h.DiskPressure != "normal" {
		fmt.Printf("disk pressure: %s (see [outbox] max_size_mb and [disk] reserved_mb; from refuse on, sends are answered 507; "+
			"degraded also refuses new event streams)\n", h.DiskPressure)
	}
	if h.WALSyncFailed != "" {
		fmt.Printf("WAL fsync failed: %s (outbox: sends are refused; inbox: nothing is acked; restart the daemon)\n",
			printable(h.WALSyncFailed))
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MESH\tMEMBER\tCONNECTED\tBREAKER\tLAG\tQUEUED\tINFLIGHT\tDEAD")
	for _, m := range h.Meshes {
		connected := "no"
		switch {
		case m.Connected:
			connected = "yes"
		case m.Revoked:
			connected = "no (key revoked)"
		}
		fmt.Fprintln(tw, row(m.Mesh, short(m.MemberPubkey, 16), connected, m.Breaker, fmt.Sprintf("%dms", m.LagMs),
			strconv.Itoa(m.QueueDepth), strconv.Itoa(m.Inflight), strconv.Itoa(m.Dead)))
	}
	tw.Flush()
	printSendPace(h.Meshes)
	printHookStatus(h.Hooks) // hook_status.go
	if r.LiveSessions != nil {
		fmt.Println(sessionCount(*r.LiveSessions, r.Sessions != nil))
	}
}

// sessionCount is the line of `daemon status` on the agent sessions:
// how many are live, and where they are listed.
func sessionCount(n int, listed bool) string {
	switch {
	case n == 0:
		return "agent sessions: none live (claudemesh launch and claudemesh mcp register them)"
	case listed:
		return fmt.Sprintf("agent sessions: %d live, below", n)
	}
	return fmt.Sprintf("agent sessions: %d live (claudemesh status lists them)", n)
}

// printSendPace says which meshes' sends the broker holds back: a pause
// after a rate-limit refusal, the pace since, destinations backing off.
func printSendPace(meshes []messages.MeshHealth) {
	for _, m := range meshes {
		p := m.SendPace
		var parts []string
		if p.PausedUntil != "" {
			parts = append(parts, "paused until "+stamp(p.PausedUntil)+" (the broker's rate limit)")
		}
		if p.PaceMs > 0 {
			parts = append(parts, fmt.Sprintf("paced: one send at a time, at least %dms apart", p.PaceMs))
		}
		if p.DestinationBackoffs > 0 {
			parts = append(parts, fmt.Sprintf("%d destination(s) backing off (no connected peer)", p.DestinationBackoffs))
		}
		if len(parts) > 0 {
			fmt.Printf("sends to %s: %s; %d rate-limit refusal(s) so far\n", m.Mesh, strings.Join(parts, "; "), p.RateLimited)
		}
	}
}

// upstreamStatusReport is `daemon status --json` of an upstream daemon:
// which daemon it is, as `daemon version` names it, and what its API
// says — its ipc features, its health as it answered (its pid, each
// mesh's broker connection), how many agent sessions it has registered.
type upstreamStatusReport struct {
	Running       bool                     `json:"running"`
	Socket        string                   `json:"socket"`
	Daemon        *ipc.Daemon              `json:"daemon"`
	IPCAPI        string                   `json:"ipc_api"`
	SchemaVersion int                      `json:"schema_version"`
	IPCFeatures   []string                 `json:"ipc_features"`
	Health        *messages.UpstreamHealth `json:"health"` // null when it does not offer health
	LiveSessions  *int                     `json:"live_sessions,omitempty"`
}

// upstreamStatus prints the status of the upstream daemon d, which
// answered GET /v1/version with v.
func upstreamStatus(ctx context.Context, client *ipc.Client, v *messages.Version, d *ipc.Daemon, socket string, asJSON bool) error {
	r := upstreamStatusReport{Running: true, Socket: socket, Daemon: d, IPCAPI: v.IPCAPI, SchemaVersion: v.SchemaVersion,
		IPCFeatures: d.Features, Health: d.Health}
	if d.Offers("sessions") {
		if sessions, err := client.Sessions(ctx); err == nil {
			n := len(sessions)
			r.LiveSessions = &n
		}
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(&r)
	}
	pid := ""
	if r.Health != nil {
		pid = fmt.Sprintf("pid %d, ", r.Health.PID)
	}
	fmt.Printf("daemon: running, upstream %s (%sipc %s, schema %d)\n", d.Version, pid, r.IPCAPI, r.SchemaVersion)
	fmt.Printf("socket: %s\n", socket)
	fmt.Printf("ipc features: %s\n", strings.Join(r.IPCFeatures, ", "))
	if r.Health == nil {
		fmt.Println("brokers: not said (the daemon does not offer the health feature)")
	} else {
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MESH\tBROKER")
		for _, slug := range slices.Sorted(maps.Keys(r.Health.Brokers)) {
			fmt.Fprintln(tw, row(slug, r.Health.Brokers[slug]))
		}
		tw.Flush()
	}
	if r.LiveSessions != nil {
		fmt.Printf("agent sessions: %d registered\n", *r.LiveSessions)
	}
	return nil
}
