package actors

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// Agent mail in the inbox actor: a push's mail header, the receipts it
// records on the outbox, and the notices its contact policy sends back.

// mail reads the mail header of push p into it (subject, thread,
// importance, acknowledgement asked) and returns it; nil when the push
// carries none. The envelope leaves the meta the row keeps; one that
// cannot be read is noted there (mail_error) and the message kept
// without it. A reply whose sender named no thread is in the thread of
// the message it answers.
func (in *InboxActor) mail(p *messages.PushFrame, it *messages.InboxItem) *messages.Mail {
	rest, env, err := messages.SplitMail(p.Meta)
	it.Meta = rest
	var h *messages.Mail
	if err == nil && env != nil {
		h, err = in.cfg.Identity.OpenMail(p.SenderPubkey, env)
	}
	if err != nil {
		in.log.Warn("mail header unreadable", "client_message_id", p.ClientMessageID, "err", err)
		it.Meta = metaNote(it.Meta, "mail_error", err)
		return nil
	}
	if h == nil || h.Receipt != "" {
		return h
	}
	it.Subject, it.ThreadID, it.Importance, it.AckRequired = h.Subject, h.ThreadID, h.ImportanceOf(), h.AckRequired
	if h.ReplyToID != "" {
		it.ReplyToID = h.ReplyToID
		if it.ThreadID == "" {
			it.ThreadID = h.ReplyToID
		}
	}
	return h
}

// receipt records what a recipient said of one of this mesh's messages on
// its outbox row, publishes a "receipt" event when it is new, and acks the
// push once the record is on disk (else the broker pushes it again).
func (in *InboxActor) receipt(ctx actor.Context, p *messages.PushFrame, conn *wsclient.Conn, h *messages.Mail) {
	rec := &messages.RecordReceipt{Mesh: in.cfg.Slug, ClientMessageID: h.ReceiptFor, Kind: h.Receipt, Peer: p.SenderPubkey,
		PeerName: cmp.Or(p.SenderName, h.Name), At: pushTime(p), Reason: h.Reason}
	if rec.PeerName == "" && len(p.SenderPubkey) >= 8 {
		rec.PeerName = p.SenderPubkey[:8]
	}
	if t, err := time.Parse(time.RFC3339Nano, h.Until); err == nil {
		rec.Until = t.UnixMilli()
	}
	ctx.ReenterAfter(ctx.RequestFuture(in.store, rec, StoreTimeout), func(res any, err error) {
		r, err := answerOf[*messages.ReceiptRecorded](res, err)
		if err != nil {
			in.log.Error("record receipt", "client_message_id", h.ReceiptFor, "err", err)
			return // not acked: the broker pushes it again
		}
		if r.Inserted {
			in.receiptEvent(ctx, rec, r)
		}
		in.ack(p, conn)
	})
}

// receiptEvent has the store append and publish the "receipt" event of a
// new receipt.
func (in *InboxActor) receiptEvent(ctx actor.Context, rec *messages.RecordReceipt, r *messages.ReceiptRecorded) {
	ev := &messages.ReceiptEvent{Mesh: rec.Mesh, ClientMessageID: rec.ClientMessageID, Kind: rec.Kind, PeerPubkey: rec.Peer,
		PeerName: rec.PeerName, At: isoMs(rec.At), Reason: rec.Reason, Subject: r.Subject, ThreadID: r.ThreadID}
	if rec.Until != 0 {
		ev.Until = isoMs(rec.Until)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return
	}
	ctx.Request(in.store, &messages.AppendEvent{Name: "receipt", Data: data})
}

// notice queues the receipt that tells the sender of a direct message its
// route's contact policy held or refused it, then acks the push; a notice
// the outbox did not take leaves the push unacked, to come again.
func (in *InboxActor) notice(ctx actor.Context, pp *pendingPush, r *messages.InboundStored) {
	p := pp.push
	m := messages.Mail{Receipt: messages.ReceiptRefused, ReceiptFor: persistence.InboxDedupeKey(p.ClientMessageID, p.MessageID),
		Reason: messages.ReasonBlockAll, Name: in.cfg.Name}
	if !r.Refused {
		m = messages.Mail{Receipt: messages.ReceiptHeld, ReceiptFor: m.ReceiptFor, Until: isoMs(r.Held), Name: in.cfg.Name}
	}
	send, cid := messages.ReceiptSend(m, p.SenderPubkey, "")
	cmd, err := messages.NewAccept(in.cfg.Slug, send, cid, ulid.Make().String(), time.Now().UnixMilli(), in.cfg.Identity.SendFrame)
	if err != nil {
		in.log.Error("contact notice", "client_message_id", p.ClientMessageID, "err", err)
		in.ack(p, pp.conn)
		return
	}
	ctx.ReenterAfter(ctx.RequestFuture(in.store, cmd, StoreTimeout), func(res any, err error) {
		if _, err = answerOf[*messages.AcceptResult](res, err); err != nil {
			in.log.Error("contact notice not queued; the message will be pushed again", "client_message_id", p.ClientMessageID, "err", err)
			return
		}
		in.ack(p, pp.conn)
	})
}

// answerOf is the store's answer res to a request, of type T, with its
// error: the future's, a reply of another type, or the one it carries.
func answerOf[T interface{ Failure() error }](res any, err error) (T, error) {
	r, ok := res.(T)
	switch {
	case err != nil:
		return r, err
	case !ok:
		return r, fmt.Errorf("the store answered %T", res)
	}
	return r, r.Failure()
}

// ack tells the broker push p is kept.
func (in *InboxActor) ack(p *messages.PushFrame, conn *wsclient.Conn) {
	if err := conn.Send(clientAckFrame(p)); err != nil {
		in.log.Warn("client_ack not sent; the broker will push again", "client_message_id", p.ClientMessageID, "err", err)
	}
}

// pushTime is when the broker took push p (Unix ms), or now when it does
// not say.
func pushTime(p *messages.PushFrame) int64 {
	if t, err := time.Parse(time.RFC3339Nano, p.CreatedAt); err == nil {
		return t.UnixMilli()
	}
	return time.Now().UnixMilli()
}
