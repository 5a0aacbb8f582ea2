package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// ModeSessions measures agent sessions: one daemon on its embedded broker
// with Options.Sessions sessions registered; message k goes from session
// k mod N to session k+1 mod N (a DM sealed to that session's key), and
// its latency runs from the sender's POST /v1/send to the `message` event
// on the daemon's event stream. The report's RSSMB is the daemon's
// resident memory after the run. It is self-contained only.
const ModeSessions = "sessions"

// DefaultSessions is how many sessions a sessions run registers.
const DefaultSessions = 100

// startSessionsEnv is StartEnv for ModeSessions: alice's daemon with no
// joined mesh, so that it creates `local` on its embedded broker.
func (e *Env) startSessionsEnv(ctx context.Context) error {
	p := e.peer("alice")
	if err := e.startDaemon(ctx, p, true); err != nil {
		return err
	}
	ms, err := config.Paths{ConfigDir: e.dir + "/alice/c"}.LoadMemberships()
	if err != nil || len(ms) != 1 {
		return fmt.Errorf("bench: alice's memberships: %v %v", ms, err)
	}
	p.Membership = ms[0]
	return nil
}

// runSessions registers the sessions (this process's pid is theirs), waits
// until the broker lists them all, and runs the DMs between them.
func runSessions(ctx context.Context, opts Options, e *Env) (*Report, error) {
	n := opts.Sessions
	if n < 2 {
		return nil, errors.New("bench: a sessions run needs at least 2 sessions")
	}
	alice := e.Peers[0]
	s := &sessionSender{hc: unixClient(alice.Socket, opts.Clients), tokens: make([]string, n), pubkeys: make([]string, n)}
	defer s.hc.CloseIdleConnections()
	c := ipc.NewClient(alice.Socket)
	for i := range n {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		s.tokens[i] = hex.EncodeToString(b)
		res, err := c.RegisterSession(ctx, &messages.RegisterSession{Token: s.tokens[i], SessionID: "bench-" + strconv.Itoa(i),
			Mesh: alice.Membership.Slug, DisplayName: "session-" + strconv.Itoa(i), PID: os.Getpid()})
		if err != nil {
			return nil, fmt.Errorf("bench: register session %d: %w", i, err)
		}
		s.pubkeys[i] = res.SessionPubkey
	}
	if err := waitListed(ctx, c.AsSession(s.tokens[0]), n); err != nil {
		return nil, err
	}
	recv, err := listen(ctx, alice.Socket)
	if err != nil {
		return nil, err
	}
	defer recv.close()
	clock := e.cpuClock()
	before := clock.sample()
	rep, err := run(ctx, opts, "s"+strconv.FormatInt(time.Now().UnixNano(), 36), s, recv)
	if err != nil {
		return nil, err
	}
	rep.CPUMsPerMsg = perMessage(before, clock.sample(), rep.Delivered)
	rep.Sessions = n
	rep.RSSMB = float64(residentKB(alice.daemon.Process.Pid)) / 1024
	return rep, nil
}

// waitListed waits until the broker lists n sessions of the mesh: every
// session's connection is up.
func waitListed(ctx context.Context, c *ipc.Client, n int) error {
	deadline := time.Now().Add(startTimeout)
	for {
		peers, err := c.Peers(ctx, "")
		sessions := 0
		for _, p := range peers {
			if p.PeerRole == "session" {
				sessions++
			}
		}
		if err == nil && sessions >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %d of %d sessions connected after %s (%v)", sessions, n, startTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // poll interval; the condition is re-checked
		}
	}
}

// sessionSender sends message k as session k mod N to session k+1 mod N.
type sessionSender struct {
	hc      *http.Client
	tokens  []string
	pubkeys []string
	next    atomic.Uint64
}

func (s *sessionSender) send(ctx context.Context, id, body string) (string, error) {
	k := int(s.next.Add(1) % uint64(len(s.tokens)))
	return postSend(ctx, s.hc, map[string]string{"to": s.pubkeys[(k+1)%len(s.pubkeys)], "message": body, "client_message_id": id},
		s.tokens[k])
}
