package broker

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// sendFrames are the frames of delivery: a send is accepted through the
// accepts batcher, a client_ack written through the acks batcher.
var sendFrames = frames{
	acts((*conn).send),
	acts((*conn).clientAck),
}

// send runs the accept path: validation, B0 (a committed id answers from the
// dedupe table and spends no rate budget), the topic of a `#<id>` target
// (unknown: refused), the sessions of other replicas for a target of more
// than one key, B1 (the idempotent limiter), the recipients, then
// B2/B3 in the accepts batcher; the ack goes out after the
// commit and the push to live recipients right after it. The id is this
// connection's sender's (c.sender, the key the push carries): dedupe and
// limiter are keyed by (mesh, sender, id).
//
// A frame marked first_send (its sender never sent the id before) skips
// B0's read, a tenth of a message's CPU on a SQLite broker: the accept
// transaction answers a duplicate all the same (B2), and should the
// limiter refuse, B0 runs then, so that a committed id is never refused
// for the rate, whatever the mark says. A wrong mark costs at most one
// unit of a window the limiter found open.
func (c *conn) send(ctx actor.Context, f *messages.SendFrame) {
	arrived := time.Now()
	id := f.ClientMessageID
	if id == "" {
		id = f.ID
	}
	ack := &messages.AckFrame{Type: messages.TypeAck, ID: f.ID, ClientMessageID: id}
	if ack.ID == "" {
		ack.ID = id
	}
	if c.legacy != nil && c.legacyTooLarge(f) {
		return
	}
	fp, rej := c.validateSend(f, id)
	if rej != nil {
		c.reply(rejected(ack, rej))
		return
	}
	if f.FirstSend {
		c.metrics.firstSends.Inc()
	} else if c.answeredFromDedupe(ack, fp) {
		return
	}
	topicMembers, ok := c.topicRecipients(ack, f.TargetSpec)
	if !ok {
		return
	}
	remote, ok := c.remoteSessions(ack, f.TargetSpec) // conn_sessions.go
	if !ok {
		return
	}
	decision, err := c.limiter.Consume(context.Background(), c.mesh.ID, c.sender, id)
	if err != nil {
		c.failedSend(ack, err)
		return
	}
	if !decision.Allowed {
		if f.FirstSend && c.answeredFromDedupe(ack, fp) {
			return
		}
		retry := decision.RetryAfter.Milliseconds()
		ack.Code, ack.Error, ack.RetryAfterMs = 429, "rate_limited", &retry
		c.reply(ack)
		return
	}
	// Neither the hub's answer nor the batch's is waited for: the
	// connection goes on with its next frame meanwhile (the hub answers in
	// order, so sends still reach the batcher in the order they came).
	resolve := ctx.RequestFuture(c.hub, &hubResolve{meshID: c.mesh.ID, senderConn: c.id, senderKeys: c.keys,
		targetSpec: f.TargetSpec, priority: f.Priority, topicMembers: topicMembers, remoteSessions: remote}, askTimeout)
	ctx.ReenterAfter(resolve, func(res any, err error) {
		resolved, ok := res.(*hubResolved)
		if err != nil || !ok {
			c.failedSend(ack, errors.Join(errors.New("hub did not answer"), err))
			return
		}
		if c.legacy != nil && c.legacyNoPeer(ack, resolved) {
			return
		}
		c.accept(ctx, f, ack, fp, resolved, arrived)
	})
}

// answeredFromDedupe is B0: when the sender's id has a dedupe row, the
// send is answered from it (duplicate, or conflict for another
// fingerprint) and it reports true; a failed read is answered too.
func (c *conn) answeredFromDedupe(ack *messages.AckFrame, fp messages.Fingerprint) bool {
	row, err := c.store.LookupDedupe(context.Background(), c.mesh.ID, c.sender, ack.ClientMessageID)
	switch {
	case err != nil:
		c.failedSend(ack, err)
	case row != nil:
		res := row.Answer(fp)
		c.reply(answer(ack, &res))
	default:
		return false
	}
	return true
}

// accept hands a resolved send to the accepts batcher and acks the
// answer; the time since the frame arrived goes to cm_broker_accept_seconds.
func (c *conn) accept(ctx actor.Context, f *messages.SendFrame, ack *messages.AckFrame, fp messages.Fingerprint, resolved *hubResolved,
	arrived time.Time) {
	id := ack.ClientMessageID
	req := &broker.AcceptRequest{MeshID: c.mesh.ID, ClientMessageID: id, RequestFingerprint: fp,
		DestinationKind: resolved.kind, DestinationRef: resolved.ref, SenderPubkey: c.sender, TargetSpec: f.TargetSpec,
		SenderName: c.displayName(), Priority: f.Priority, Nonce: f.Nonce, Ciphertext: f.Ciphertext, ReplyToID: f.ReplyToID,
		Meta: f.Meta, Recipients: resolved.recipients, Online: resolved.online, SessionMembers: resolved.sessionMembers, Lease: c.lease}
	job := &acceptJob{req: req, senderConn: c.id, senderMember: c.member.Pubkey}
	future := ctx.RequestFuture(c.accepts, &batchOf[*acceptJob]{req: job}, askTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		out, ok := res.(*batchResult[broker.AcceptResult])
		if err != nil || !ok {
			c.failedSend(ack, errors.Join(errors.New("accept did not answer"), err))
			return
		}
		switch out.res.Outcome {
		case broker.Rejected:
			c.metrics.spentOnRejected.Inc()
		case broker.Failed:
			c.log.Error("accept_failed", "conn", c.id, "client_message_id", id, "err", out.res.Err)
		}
		c.reply(answer(ack, &out.res)) // the push went out from the batcher, right after the commit
		c.metrics.acceptLatency.Observe(time.Since(arrived).Seconds())
	})
}

// reply sends the ack of a send and counts its outcome.
func (c *conn) reply(ack *messages.AckFrame) {
	outcome := "rejected"
	switch ack.Code {
	case 201:
		outcome = "created"
	case 200:
		outcome = "duplicate"
	case 409:
		outcome = "conflict"
		c.metrics.fingerprintMismatch.WithLabelValues(c.mesh.ID).Inc()
	case 429:
		outcome = "rate_limited"
		c.metrics.rateLimitRejected.Inc()
	case 503:
		outcome = "failed"
	}
	c.metrics.accepts.WithLabelValues(outcome).Inc()
	if c.legacy != nil {
		ack = c.legacyAck(ack)
	}
	c.sendFrame(ack)
}

// validateSend is the part of B1 that needs no store: ids, fingerprint,
// priority, target grammar and the mesh's payload limit.
func (c *conn) validateSend(f *messages.SendFrame, id string) (messages.Fingerprint, *messages.Error) {
	var fp messages.Fingerprint
	bad := func(code, detail string) (messages.Fingerprint, *messages.Error) {
		return fp, &messages.Error{Status: 400, Code: code, Detail: detail}
	}
	if !messages.ValidClientMessageID(id) {
		return bad("invalid_client_message_id", "client_message_id must be 1-128 printable ASCII characters without spaces")
	}
	raw, err := hex.DecodeString(f.RequestFingerprint)
	if err != nil || len(raw) != len(fp) {
		return bad("invalid_request_fingerprint", "request_fingerprint must be 64 hex characters")
	}
	copy(fp[:], raw)
	switch f.Priority {
	case "now", "next", "low":
	default:
		return bad("invalid_priority", "priority must be now, next or low")
	}
	if _, err := messages.ParseDestination(f.TargetSpec); err != nil && f.TargetSpec != "@all" {
		return bad("invalid_target", "targetSpec must be a 64-hex pubkey, #topic, @group or *")
	}
	if f.Meta != nil && (len(f.Meta) == 0 || f.Meta[0] != '{' || !json.Valid(f.Meta)) {
		return bad("invalid_meta", "meta must be a JSON object")
	}
	if n := len(f.Ciphertext) + len(f.Nonce) + len(f.TargetSpec); n > c.mesh.MaxPayloadBytes {
		return fp, &messages.Error{Status: 413, Code: "payload_too_large", Detail: "payload exceeds the mesh's max_payload"}
	}
	return fp, nil
}

// acceptJob is one send for the accepts batcher: the store request, and
// who sent it, for the push the batcher makes right after the commit (so
// that it goes out even if the sender's connection is gone by then).
type acceptJob struct {
	req          *broker.AcceptRequest
	senderConn   string
	senderMember string
}

// push is the frame a committed job is pushed with.
func (j *acceptJob) push(res *broker.AcceptResult) *messages.PushFrame {
	req := j.req
	push := &messages.PushFrame{Type: messages.TypePush, MessageID: res.BrokerMessageID, MeshID: req.MeshID,
		SenderPubkey: req.SenderPubkey, SenderMemberPubkey: j.senderMember, SenderName: req.SenderName,
		TargetSpec: req.TargetSpec, ReplyToID: req.ReplyToID, Priority: req.Priority, Nonce: req.Nonce,
		Ciphertext: req.Ciphertext, CreatedAt: res.FirstSeenAt.UTC().Format(time.RFC3339Nano),
		ClientMessageID: req.ClientMessageID, RequestFingerprint: req.RequestFingerprint.Hex(),
		HistoryID: res.HistoryID, Meta: req.Meta}
	if req.DestinationKind == messages.KindTopic && len(req.TargetSpec) > 1 && req.TargetSpec[0] == '#' {
		push.Topic = req.TargetSpec[1:]
	}
	return push
}

// answer turns an accept result into the extended ack (upstream fields kept).
func answer(ack *messages.AckFrame, r *broker.AcceptResult) *messages.AckFrame {
	ack.Code = r.Status()
	switch r.Outcome {
	case broker.Created, broker.Duplicate:
		ack.Queued, ack.MessageID, ack.BrokerMessageID, ack.HistoryID = true, r.BrokerMessageID, r.BrokerMessageID, r.HistoryID
		ack.Duplicate = r.Outcome == broker.Duplicate
		available := r.HistoryAvailable
		ack.HistoryAvailable = &available
		ack.FirstSeenAt = r.FirstSeenAt.UTC().Format(time.RFC3339Nano)
	case broker.Conflict:
		ack.Error, ack.Conflict, ack.BrokerFingerprintPrefix = messages.CodeIdempotencyReused, "request_fingerprint_mismatch", r.BrokerFingerprintPrefix
	case broker.Rejected:
		var me *messages.Error
		if errors.As(r.Err, &me) {
			return rejected(ack, me)
		}
		ack.Error = r.Err.Error()
	default:
		return failed(ack)
	}
	return ack
}

func rejected(ack *messages.AckFrame, e *messages.Error) *messages.AckFrame {
	ack.Code, ack.Error = e.Status, e.Code
	return ack
}

// failed is a transient failure (5xx): nothing was stored; the client
// retries with the same id.
func failed(ack *messages.AckFrame) *messages.AckFrame {
	ack.Code, ack.Error = 503, "store_unavailable"
	return ack
}

// failedSend logs why a send could not be accepted and answers 503.
func (c *conn) failedSend(ack *messages.AckFrame, err error) {
	c.log.Error("send_failed", "conn", c.id, "client_message_id", ack.ClientMessageID, "err", err)
	c.reply(failed(ack))
}

// clientAck marks a pushed message delivered, through the acks batcher.
func (c *conn) clientAck(ctx actor.Context, f *messages.ClientAckFrame) {
	if f.ClientMessageID == "" && f.BrokerMessageID == "" {
		return
	}
	c.metrics.acks.Inc()
	ctx.Send(c.acks, &batchOf[broker.Ack]{req: broker.Ack{MeshID: c.mesh.ID, RecipientPubkeys: c.keys,
		ClientMessageID: f.ClientMessageID, BrokerMessageID: f.BrokerMessageID}})
}

// drain claims what is queued for this connection's keys (leased, so no
// other connection takes it meanwhile) and pushes it, here and, through the
// hub, to the other live connections here receiving for the row's key: a
// push reaches every connection of its key, as the accept's fan-out does,
// whichever of them claimed it (on PostgreSQL, a message accepted at
// another replica reaches this one's connections by their drains). A
// connection whose status is working or dnd takes priority "now" only:
// the rest is held until it is idle, or until it asks (drain_held,
// conn_held.go).
func (c *conn) drain(ctx actor.Context) {
	if c.member == nil {
		return
	}
	claimed, _, err := c.claimAndPush(ctx, c.statusNow() != broker.StatusIdle)
	if err == nil && claimed == drainBatch {
		ctx.Send(ctx.Self(), &drain{})
	}
}

// claimAndPush claims up to drainBatch rows queued for the connection's
// keys (only priority "now" with onlyNow) and pushes them as drain says;
// it returns how many rows it claimed and how many it pushed here (a row
// that did not encode is logged, and pushed again once its lease runs
// out).
func (c *conn) claimAndPush(ctx actor.Context, onlyNow bool) (claimed, pushed int, err error) {
	ds, err := c.store.ClaimDeliveries(context.Background(), broker.Claim{MeshID: c.mesh.ID, RecipientPubkeys: c.keys,
		Lease: c.lease, Limit: drainBatch, OnlyNow: onlyNow})
	if err != nil {
		c.log.Error("claim deliveries", "conn", c.id, "err", err)
		return 0, 0, err
	}
	c.metrics.pushes.Add(float64(len(ds)))
	if len(ds) > 0 {
		ctx.Send(c.sweeper, &leaseTaken{at: c.now().Add(c.lease)})
	}
	rows := &hubDrainedPush{meshID: c.mesh.ID, conn: c.id, rows: make([]drainedRow, 0, len(ds))}
	for i := range ds {
		d := &ds[i]
		frame := c.sendFrame(&messages.PushFrame{Type: messages.TypePush, MessageID: d.BrokerMessageID, MeshID: d.MeshID,
			SenderPubkey: d.SenderPubkey, SenderName: d.SenderName, TargetSpec: d.TargetSpec, ReplyToID: d.ReplyToID, Priority: d.Priority,
			Nonce: d.Nonce, Ciphertext: d.Ciphertext, CreatedAt: d.CreatedAt.UTC().Format(time.RFC3339Nano),
			ClientMessageID: d.ClientMessageID, RequestFingerprint: d.RequestFingerprint.Hex(), HistoryID: d.HistoryID,
			Meta: d.Meta, Topic: topicOf(d.TargetSpec)})
		if frame == nil {
			continue // not encoded (logged): its lease runs out, and it is pushed again
		}
		rows.rows = append(rows.rows, drainedRow{key: d.RecipientPubkey, priority: d.Priority, frame: frame})
	}
	if len(rows.rows) > 0 {
		ctx.Send(c.hub, rows)
	}
	return len(ds), len(rows.rows), nil
}

// hubDrainedPush asks the hub to push what a connection drained to the
// other live connections that take each row now (presence.takes), as the
// accept's fan-out would have.
type hubDrainedPush struct {
	meshID, conn string // conn: the one that drained, and pushed to itself
	rows         []drainedRow
}

type drainedRow struct {
	key, priority string
	frame         []byte
}

func (h *hub) drainedPush(m *hubDrainedPush) {
	for _, p := range h.byMesh[m.meshID] {
		if p.connID == m.conn {
			continue
		}
		for _, r := range m.rows {
			if p.takes(r.key, r.priority == "now") {
				h.metrics.pushes.Inc() // counted before anyone can see it
				p.link.Send(r.frame)
			}
		}
	}
}

func topicOf(targetSpec string) string {
	if len(targetSpec) > 1 && targetSpec[0] == '#' {
		return targetSpec[1:]
	}
	return ""
}
