// Package coldpath sends a message to a mesh's broker without the daemon
// (spec §8): one WebSocket with the member's key (hello and strict feature
// negotiation, as the daemon does), the send frame the daemon would build
// for the same request, the broker's ack, a normal close. `claudemesh send`
// falls back to it when no daemon answers on the socket.
//
// Nothing is stored on this path: the ack is the outcome. A caller that
// gets no ack cannot know whether the broker accepted the message; sending
// again with the same client_message_id finds out (the broker's dedupe
// answers 200 with the first broker_message_id, or 409 for a different
// request).
//
// Pushes that arrive while a Session waits are not acknowledged, so the
// broker keeps them for the member's daemon.
//
// A broker that does not negotiate the delivery contract (the upstream
// broker) is refused unless Options.Legacy (send --legacy-broker, or
// [features] legacy_broker in config.toml), as the daemon refuses it: a
// retry of a lost ack is then a second message, not a duplicate.
//
// The session connects with the member key (hello, session id "cli-<pid>"),
// not with an ephemeral session key as the spec's table of cold-path
// behaviour has it: a reply to the sender then goes to the member, whose
// daemon can open it, where a reply to a session key that no longer exists
// could be opened by no one; and the recipient sees the same sender whether
// the message came through the daemon or not.
package coldpath

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// CloseWait bounds the wait for the broker's close at the end of a session.
const CloseWait = 2 * time.Second

// ErrIdentity means the membership's secret key is not a usable identity.
var ErrIdentity = errors.New("bad member secret key")

// Session is one connection to a mesh's broker as its member.
type Session struct {
	conn *wsclient.Conn
	id   *meshcrypto.Identity
	mesh string
}

// Options shape one session.
type Options struct {
	SessionID string // names this connection in the peer list
	// Legacy accepts a broker that does not negotiate the delivery
	// contract: no feature negotiation, the broker's plain ack.
	Legacy bool
}

// Dial connects to m's broker as m's member. ctx bounds the connect, hello
// and negotiation.
func Dial(ctx context.Context, m *config.Membership, opts Options) (*Session, error) {
	if m.BrokerURL == "" {
		return nil, fmt.Errorf("mesh %s is served by the daemon's embedded broker: the local mesh needs the daemon: start it with `claudemesh daemon up`", m.Slug)
	}
	id, err := meshcrypto.ParseIdentity(m.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("mesh %s: %w: %w", m.Slug, ErrIdentity, err)
	}
	conn, _, err := wsclient.Dial(ctx, wsclient.Config{URL: m.BrokerURL, MeshID: m.MeshID, MemberID: m.MemberID,
		Identity: id, DisplayName: m.Name, SessionID: opts.SessionID, Channel: messages.ChannelCLI, Legacy: opts.Legacy})
	var ne *wsclient.NegotiationError
	if errors.As(err, &ne) {
		return nil, fmt.Errorf("mesh %s: the broker at %s does not negotiate the delivery contract (%s: %s), "+
			"so a retried send could be delivered twice; to send to it anyway, pass --legacy-broker or set "+
			"[features] legacy_broker = true in config.toml", m.Slug, m.BrokerURL, ne.Reason.Feature,
			cmp.Or(ne.Reason.Detail, ne.Reason.Kind))
	}
	if err != nil {
		return nil, fmt.Errorf("mesh %s: cannot reach the broker at %s: %w", m.Slug, m.BrokerURL, err)
	}
	return &Session{conn: conn, id: id, mesh: m.Slug}, nil
}

// Close says goodbye (1000) and waits at most CloseWait for the broker's
// close.
func (s *Session) Close() {
	s.conn.Close(1000, "send done")
	select {
	case <-s.conn.Done():
	case <-time.After(CloseWait):
	}
}

// Peers asks the broker for the mesh's peer list; ctx bounds the wait.
func (s *Session) Peers(ctx context.Context) ([]messages.Peer, error) {
	reqID := ulid.Make().String()
	if err := s.conn.Send(&messages.ListPeersFrame{Type: messages.TypeListPeers, ReqID: reqID}); err != nil {
		return nil, err
	}
	var peers []messages.Peer
	err := s.await(ctx, "the peers_list", func(f any) (bool, error) {
		switch f := f.(type) {
		case *messages.PeersListFrame:
			if f.ReqID == "" || f.ReqID == reqID {
				peers = f.Peers
				return true, nil
			}
		case *messages.ErrorFrame:
			if f.ReqID == reqID {
				return true, fmt.Errorf("list_peers: %s: %s", f.Code, f.Message)
			}
		}
		return false, nil
	})
	return peers, err
}

// Send sends the validated request, its recipient resolved (a name is
// refused), and returns its client_message_id (the request's, or a fresh
// ULID) and the broker's ack, which may be a refusal (see
// messages.AckFrame). A DM is sealed with the member key, and the
// fingerprint scoped to the membership's slug, as the daemon does for a
// send on that mesh: a retry of the id through the daemon is the same
// request to the broker. ctx bounds the wait for the ack.
func (s *Session) Send(ctx context.Context, send *messages.Send) (cid string, ack *messages.AckFrame, err error) {
	cid = send.ClientMessageID
	if cid == "" {
		cid = ulid.Make().String()
	}
	if send.Destination.NamesPeer() {
		return cid, nil, fmt.Errorf("%q names a peer: resolve it through Peers first", send.Destination.Ref)
	}
	frame, err := s.id.SendFrame(send, cid, send.Fingerprint().Scoped(s.mesh))
	if err != nil {
		return cid, nil, err
	}
	if err := s.conn.Send(frame); err != nil {
		return cid, nil, fmt.Errorf("mesh %s: send: %w", s.mesh, err)
	}
	err = s.await(ctx, "the ack of "+cid, func(f any) (bool, error) {
		switch f := f.(type) {
		case *messages.AckFrame:
			if f.ClientMessageID == cid || f.ID == cid {
				ack = f
				return true, nil
			}
		case *messages.ErrorFrame:
			if f.ID == cid {
				return true, fmt.Errorf("the broker rejected %s: %s: %s", cid, f.Code, f.Message)
			}
		}
		return false, nil
	})
	if ctx.Err() != nil && ack == nil {
		err = fmt.Errorf("no ack for %s: the message may or may not have been accepted; "+
			"send again with the same client_message_id to find out: %w", cid, err)
	}
	return cid, ack, err
}

// await reads frames until match says done, the connection ends or ctx
// does.
func (s *Session) await(ctx context.Context, what string, match func(any) (bool, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mesh %s: waiting for %s: %w", s.mesh, what, err)
		}
		select {
		case f, ok := <-s.conn.Frames():
			if !ok {
				return fmt.Errorf("mesh %s: the broker connection ended before %s: %w", s.mesh, what, s.conn.Err())
			}
			if done, err := match(f); done {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("mesh %s: waiting for %s: %w", s.mesh, what, ctx.Err())
		}
	}
}
