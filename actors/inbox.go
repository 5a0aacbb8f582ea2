package actors

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// InboxActor takes one mesh's pushes: it decrypts a DM with the member key
// (other bodies are base64 plaintext), stores the message deduplicated by
// its client_message_id (else "broker:<broker_message_id>"), acks it to the
// broker after the commit — dedupe hits too, else the broker redelivers —
// and (through the store, which publishes every committed event) a "message"
// event follows for new rows only. A body that does not
// decrypt is stored with body null and meta.decrypt_error, acked, and fires
// no event. Presence pushes become peer_join / peer_leave events.
type InboxActor struct {
	cfg     MeshConfig
	store   *actor.PID
	metrics *metrics.Daemon
	log     *slog.Logger
	faults  *Faults
	// pending are the pushes the store has not answered yet, by inbox row
	// id; one the store leaves unanswered for StoreTimeout is dropped
	// (never acked: the broker pushes it again). sweeping says a sweep is
	// due.
	pending  map[string]*pendingPush
	sweeping bool
	// expiry is the timer of the route's next contact request to run out
	// (expiryAt, Unix ms; 0 with no timer pending), expiring says a look
	// at those that ran out is under way, and again that the timer fired
	// meanwhile (inbox_mail.go).
	expiry          *time.Timer
	expiryAt        int64
	expiring, again bool
}

// inboxFlush asks the inbox to answer *inboxFlushed once it has taken
// every push sent to it before: the barrier after which what the broker
// pushed before an answer on the link is in the inbox for whatever asks
// the store next (brokerconn_held.go). The reader hands pushes to the
// inbox and the answer to the connection, which then sends this. The
// inbox takes its messages in order and hands each push to the store as it
// takes it (StoreInbound); the store runs inbox.db's commands in the order
// they came, so a listing asked after the answer runs after those inserts
// — in a later transaction, or in theirs — without waiting for the fsync
// their acks wait for. Pushed and more are the broker's answer's, echoed.
type inboxFlush struct {
	id     string
	pushed int
	more   bool
}

// inboxFlushed is the inbox's answer to *inboxFlush.
type inboxFlushed struct{ *inboxFlush }

// pendingPush is a push being stored: what its ack needs.
type pendingPush struct {
	push  *messages.PushFrame
	conn  *wsclient.Conn
	kind  string
	body  bool // it decrypted
	asked time.Time
}

// sweepPending is the inbox actor's timer: drop what the store left
// unanswered.
type sweepPending struct{}

func newInbox(cfg MeshConfig, store *actor.PID, m *metrics.Daemon, log *slog.Logger, faults *Faults) actor.Producer {
	return func() actor.Actor {
		return &InboxActor{cfg: cfg, store: store, metrics: m, log: log.With("actor", "inbox"), faults: faults,
			pending: map[string]*pendingPush{}}
	}
}

func (in *InboxActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		in.expireRequests(ctx)
	case *actor.Stopping:
		if in.expiry != nil {
			in.expiry.Stop()
		}
	case *actor.Stopped, *actor.Restarting:
	case *expireHeld:
		in.expiryAt = 0
		in.expireRequests(ctx)
	case *inboundPush:
		if m.push.Subtype == "system" {
			in.presence(ctx, m.push)
			return
		}
		if in.faults.inboxPanics(in.cfg.Slug) {
			panic("fault injection: inbox of mesh " + in.cfg.Slug)
		}
		in.message(ctx, m.push, m.conn)
	case *messages.InboundStored:
		in.stored(ctx, m)
	case *sweepPending:
		in.sweep(ctx)
	case *inboxFlush:
		ctx.Respond(&inboxFlushed{m}) // every push before it is with the store (inboxFlush)
	case *messages.EventAppended:
	default:
		in.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

// message asks the store to keep a pushed message; its answer (stored)
// acks it. A receipt is recorded on its outbox row instead (inbox_mail.go).
func (in *InboxActor) message(ctx actor.Context, p *messages.PushFrame, conn *wsclient.Conn) {
	item, receipt := in.item(p)
	if receipt != nil {
		in.receipt(ctx, p, conn, receipt)
		return
	}
	in.pending[item.ID] = &pendingPush{push: p, conn: conn, kind: item.Kind, body: item.Body != nil, asked: time.Now()}
	ctx.Request(in.store, &messages.StoreInbound{Item: item})
	if !in.sweeping {
		in.sweeping = true
		workers.SendLater(ctx, StoreTimeout, &sweepPending{})
	}
}

// stored acks a message the store kept (or found already kept) to the
// broker; one its contact policy held or refused once the sender's notice
// is queued. One the store failed to keep is not acked: the broker
// delivers it again.
func (in *InboxActor) stored(ctx actor.Context, r *messages.InboundStored) {
	p, ok := in.pending[r.ID]
	if !ok {
		return // dropped by a sweep, or asked before a restart: not acked
	}
	delete(in.pending, r.ID)
	if r.Err != nil {
		in.log.Error("store inbound message", "client_message_id", p.push.ClientMessageID, "err", r.Err)
		return
	}
	switch {
	case r.Held != 0 || r.Refused:
		in.notice(ctx, p, r)
		return
	case !r.Inserted:
		in.metrics.Dedupe.WithLabelValues(in.cfg.Slug, "in").Inc()
	case !p.body:
		in.metrics.Undecrypted.WithLabelValues(in.cfg.Slug).Inc()
	default:
		in.metrics.Recv.WithLabelValues(in.cfg.Slug, p.kind, "peer").Inc()
	}
	in.ack(p.push, p.conn)
}

// sweep drops the pushes the store left unanswered for StoreTimeout.
func (in *InboxActor) sweep(ctx actor.Context) {
	in.sweeping = false
	cut := time.Now().Add(-StoreTimeout)
	for id, p := range in.pending {
		if p.asked.Before(cut) {
			delete(in.pending, id)
			in.log.Error("store inbound message", "client_message_id", p.push.ClientMessageID, "err", "the store did not answer in time")
		}
	}
	if len(in.pending) > 0 {
		in.sweeping = true
		workers.SendLater(ctx, StoreTimeout, &sweepPending{})
	}
}

// item decodes a push into its inbox row, or into the receipt it carries
// (a receipt is not an inbox row).
func (in *InboxActor) item(p *messages.PushFrame) (messages.InboxItem, *messages.Mail) {
	ms := time.Now().UnixMilli() // what is stored: the event says the time /v1/inbox will
	it := messages.InboxItem{ID: ulid.Make().String(), ClientMessageID: persistence.InboxDedupeKey(p.ClientMessageID, p.MessageID),
		BrokerMessageID: p.MessageID, Mesh: in.cfg.Slug, Kind: "dm", SenderPubkey: p.SenderPubkey, SenderName: p.SenderName,
		ReceivedAt: time.UnixMilli(ms).UTC().Format(time.RFC3339Nano), ReceivedAtMs: ms, ReplyToID: messages.NullString(p.ReplyToID), Meta: p.Meta,
		RecipientPubkey: in.cfg.Identity.PublicKeyHex(), RecipientKind: "member", Priority: p.Priority, SentAt: p.CreatedAt}
	if in.cfg.Session != nil {
		it.RecipientKind = "session"
	}
	if it.SenderName == "" && len(p.SenderPubkey) >= 8 {
		it.SenderName = p.SenderPubkey[:8]
	}
	switch dest, err := messages.ParseDestination(p.TargetSpec); {
	case err == nil && dest.Kind == messages.KindTopic:
		it.Kind, it.Topic = "topic", messages.NullString(cmp.Or(p.Topic, p.TargetSpec))
	case p.TargetSpec == "" && p.Topic != "":
		// The upstream broker's multicast push names the topic, not the target.
		it.Kind, it.Topic = "topic", messages.NullString(p.Topic)
	case upstreamMulticast(p):
		it.Kind, it.Topic = "topic", "*"
	}
	h := in.mail(p, &it)
	if h != nil && h.Receipt != "" {
		return it, h
	}
	body, err := in.decrypt(p, it.Kind == "dm")
	if err != nil {
		it.Meta = metaNote(it.Meta, "decrypt_error", err)
		return it, nil
	}
	text := string(body)
	it.Body = &text
	return it, nil
}

// upstreamMulticast reports whether a push has the shape of the upstream
// broker's multicast (wire protocol §2.3, shape 2: a `*`, `@all` or
// `@group` send, pushed with its sender's member key and no
// client_message_id), which names no target: its drained DMs (shape 1)
// carry neither a member key nor a name, and ours always name the
// target. Which of the three it was sent to the push does not say; it is
// kept as a broadcast (`*`).
func upstreamMulticast(p *messages.PushFrame) bool {
	return p.TargetSpec == "" && p.SenderMemberPubkey != "" && p.ClientMessageID == ""
}

// decrypt opens a DM with the member key; any other body is base64
// plaintext. A DM whose target the push does not name (the upstream
// broker's drained rows) falls back to plaintext when it does not open.
func (in *InboxActor) decrypt(p *messages.PushFrame, dm bool) ([]byte, error) {
	if !dm {
		return meshcrypto.DecodePlain(p.Ciphertext)
	}
	body, err := in.cfg.Identity.OpenDM(p.SenderPubkey, p.Nonce, p.Ciphertext)
	if err != nil && p.TargetSpec == "" {
		return meshcrypto.DecodePlain(p.Ciphertext)
	}
	return body, err
}

// metaNote is meta with key set to err's text: how an inbox row says what
// could not be read of it.
func metaNote(meta json.RawMessage, key string, err error) json.RawMessage {
	m := map[string]any{}
	_ = json.Unmarshal(meta, &m) // a meta that is not an object is replaced
	m[key] = err.Error()
	out, _ := json.Marshal(m)
	return out
}

// presence turns peer_joined / peer_left into events.
func (in *InboxActor) presence(ctx actor.Context, p *messages.PushFrame) {
	name := map[string]string{"peer_joined": "peer_join", "peer_returned": "peer_join", "peer_left": "peer_leave"}[p.Event]
	if name == "" {
		return
	}
	var data struct {
		Name   string `json:"name"`
		Pubkey string `json:"pubkey"`
	}
	_ = json.Unmarshal(p.EventData, &data)
	payload, _ := json.Marshal(map[string]string{"mesh": in.cfg.Slug, "pubkey": data.Pubkey, "display_name": data.Name})
	ctx.Request(in.store, &messages.AppendEvent{Name: name, Data: payload}) // the store publishes it
}
