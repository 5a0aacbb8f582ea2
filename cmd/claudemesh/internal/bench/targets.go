package bench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// DefaultTo is where accept and broker runs send: a group no connection
// claims, so that no recipient's inbox is involved (and no topic must
// exist first).
const DefaultTo = "@bench"

// Target is where a run sends.
type Target struct {
	Socket   string             // accept, e2e: the sending daemon's socket
	Mesh     string             // accept, e2e: the mesh to send on ("": the daemon's only one)
	To       string             // accept, broker: the destination ("": DefaultTo); e2e: the receiver's pubkey
	Receiver string             // e2e: the receiving daemon's socket
	Member   *config.Membership // broker: the member to connect as
}

// Run measures opts.Mode against t.
func Run(ctx context.Context, opts Options, t Target) (*Report, error) {
	runID := ulid.Make().String()
	if t.To == "" {
		t.To = DefaultTo
	}
	switch opts.Mode {
	case ModeAccept:
		s := newDaemonSender(t, opts.Clients)
		defer s.hc.CloseIdleConnections()
		return run(ctx, opts, runID, s, nil)
	case ModeE2E:
		if t.Receiver == "" {
			return nil, errors.New("bench: e2e needs a receiving daemon")
		}
		recv, err := listen(ctx, t.Receiver)
		if err != nil {
			return nil, err
		}
		defer recv.close()
		s := newDaemonSender(t, opts.Clients)
		defer s.hc.CloseIdleConnections()
		return run(ctx, opts, runID, s, recv)
	case ModeBroker:
		if t.Member == nil {
			return nil, errors.New("bench: broker mode needs a member to connect as")
		}
		var s brokerSenders
		defer s.close()
		for range max(opts.Connections, 1) {
			c, err := dialBroker(ctx, t.Member, t.To)
			if err != nil {
				return nil, err
			}
			s.conns = append(s.conns, c)
		}
		return run(ctx, opts, runID, &s, nil)
	}
	return nil, fmt.Errorf("bench: unknown mode %q (accept, e2e or broker)", opts.Mode)
}

// RunSelfContained starts what opts.Mode needs from the claudemesh binary
// bin (StartEnv; databaseURL puts its broker on PostgreSQL), measures it
// and removes it.
func RunSelfContained(ctx context.Context, opts Options, bin, databaseURL string) (*Report, error) {
	env, err := StartEnv(ctx, bin, opts, databaseURL)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	switch opts.Mode {
	case ModeStartup:
		return runStartup(ctx, opts, env)
	case ModeSessions:
		opts.Sessions = cmp.Or(opts.Sessions, DefaultSessions)
		return runSessions(ctx, opts, env)
	case ModeBacklog:
		return runBacklog(ctx, opts, env)
	}
	alice := env.Peers[0]
	t := Target{Socket: alice.Socket, Member: &alice.Membership}
	if opts.Mode == ModeE2E {
		bob := env.Peers[1]
		t.To, t.Receiver = bob.Membership.Pubkey, bob.Socket
	}
	clock := env.cpuClock()
	before := clock.sample()
	rep, err := Run(ctx, opts, t)
	if err == nil {
		rep.CPUMsPerMsg = perMessage(before, clock.sample(), rep.Delivered)
	}
	return rep, err
}

// daemonSender posts to a daemon's POST /v1/send.
type daemonSender struct {
	hc       *http.Client
	to, mesh string
}

func newDaemonSender(t Target, clients int) *daemonSender {
	return &daemonSender{hc: unixClient(t.Socket, clients), to: t.To, mesh: t.Mesh}
}

func (d *daemonSender) send(ctx context.Context, id, body string) (string, error) {
	req := map[string]string{"to": d.to, "message": body, "client_message_id": id}
	if d.mesh != "" {
		req["mesh"] = d.mesh
	}
	return postSend(ctx, d.hc, req, "")
}

// postSend posts req to POST /v1/send (as the session of token, when set)
// and returns the error code of a refusal, "" for a 202.
func postSend(ctx context.Context, hc *http.Client, req map[string]string, token string) (string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost/v1/send", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if token != "" {
		hreq.Header.Set("Authorization", messages.SessionHeader+" "+token)
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusAccepted {
		return "", nil
	}
	var e messages.ErrorBody
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return e.Error, nil
	}
	return "http_" + strconv.Itoa(resp.StatusCode), nil
}

// receiver reads a daemon's /v1/events and records when each message
// event arrives, by client_message_id.
type receiver struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	at     map[string]time.Time
	dups   int
}

// listen opens the receiving daemon's event stream; it returns once the
// daemon has answered, so nothing sent afterwards can be missed.
func listen(ctx context.Context, sock string) (*receiver, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := ipc.NewClient(sock).Events(ctx, "", 0)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("bench: the receiver's /v1/events: %w", err)
	}
	r := &receiver{cancel: cancel, done: make(chan struct{}), at: map[string]time.Time{}}
	go func() {
		defer close(r.done)
		defer stream.Close()
		var ev struct {
			ClientMessageID string `json:"client_message_id"`
		}
		for {
			e, err := stream.Next()
			if err != nil {
				return
			}
			ev.ClientMessageID = ""
			if e.Name != "message" || json.Unmarshal(e.Data, &ev) != nil || ev.ClientMessageID == "" {
				continue
			}
			now := time.Now()
			r.mu.Lock()
			if _, seen := r.at[ev.ClientMessageID]; seen {
				r.dups++
			} else {
				r.at[ev.ClientMessageID] = now
			}
			r.mu.Unlock()
		}
	}()
	return r, nil
}

func (r *receiver) arrived(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[id]
	return at, ok
}

func (r *receiver) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dups
}

func (r *receiver) close() {
	r.cancel()
	<-r.done
}

// brokerSender sends frames over one member connection and waits for each
// ack, matched by id.
type brokerSender struct {
	conn *wsclient.Conn
	to   string
	mu   sync.Mutex
	wait map[string]chan *messages.AckFrame
	done chan struct{}
}

func dialBroker(ctx context.Context, m *config.Membership, to string) (*brokerSender, error) {
	id, err := meshcrypto.ParseIdentity(m.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("bench: mesh %s: %w", m.Slug, err)
	}
	conn, _, err := wsclient.Dial(ctx, wsclient.Config{URL: m.BrokerURL, MeshID: m.MeshID, MemberID: m.MemberID,
		Identity: id, DisplayName: m.Name, SessionID: "bench-" + ulid.Make().String(), Channel: messages.ChannelCLI, SendQueue: 1 << 16})
	if err != nil {
		return nil, fmt.Errorf("bench: mesh %s: %w", m.Slug, err)
	}
	b := &brokerSender{conn: conn, to: to, wait: map[string]chan *messages.AckFrame{}, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for f := range conn.Frames() {
			if ack, ok := f.(*messages.AckFrame); ok {
				b.mu.Lock()
				ch := b.wait[ack.ClientMessageID]
				delete(b.wait, ack.ClientMessageID)
				b.mu.Unlock()
				if ch != nil {
					ch <- ack
				}
			}
		}
	}()
	return b, nil
}

func (b *brokerSender) send(ctx context.Context, id, body string) (string, error) {
	var fp [32]byte
	_, _ = rand.Read(fp[:])
	nonce, ciphertext, err := meshcrypto.EncodePlain([]byte(body))
	if err != nil {
		return "", err
	}
	ch := make(chan *messages.AckFrame, 1)
	b.mu.Lock()
	b.wait[id] = ch
	b.mu.Unlock()
	frame := &messages.SendFrame{Type: messages.TypeSend, ID: id, ClientMessageID: id, RequestFingerprint: hex.EncodeToString(fp[:]),
		TargetSpec: b.to, Priority: "next", Nonce: nonce, Ciphertext: ciphertext}
	if err := b.conn.Send(frame); err != nil {
		return "", err
	}
	select {
	case ack := <-ch:
		if ack.Code == http.StatusCreated {
			return "", nil
		}
		if ack.Error != "" {
			return ack.Error, nil
		}
		return "ack_" + strconv.Itoa(ack.Code), nil
	case <-b.done:
		return "", fmt.Errorf("bench: the broker connection ended: %w", b.conn.Err())
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (b *brokerSender) close() {
	b.conn.Close(1000, "bench done")
	<-b.done
}

// brokerSenders spreads sends over several connections, in turn.
type brokerSenders struct {
	conns []*brokerSender
	next  atomic.Uint64
}

func (s *brokerSenders) send(ctx context.Context, id, body string) (string, error) {
	return s.conns[s.next.Add(1)%uint64(len(s.conns))].send(ctx, id, body)
}

func (s *brokerSenders) close() {
	for _, c := range s.conns {
		c.close()
	}
}
