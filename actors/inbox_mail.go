package actors

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/claudemesh/claudemesh-go/actors/workers"
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
		it.ReplyToID = messages.NullString(h.ReplyToID)
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
// the outbox did not take leaves the push unacked, to come again. A held
// message's request is looked at again when it runs out (expireAt).
func (in *InboxActor) notice(ctx actor.Context, pp *pendingPush, r *messages.InboundStored) {
	p := pp.push
	m := messages.Mail{Receipt: messages.ReceiptRefused, ReceiptFor: persistence.InboxDedupeKey(p.ClientMessageID, p.MessageID),
		Reason: messages.ReasonBlockAll, Name: in.cfg.Name}
	if !r.Refused {
		m = messages.Mail{Receipt: messages.ReceiptHeld, ReceiptFor: m.ReceiptFor, Until: isoMs(r.Held), Name: in.cfg.Name}
		in.expireAt(ctx, r.Held)
	}
	cmd, err := in.receiptAccept(m, p.SenderPubkey)
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

// receiptAccept is the accept that queues receipt m to sender, sealed
// with the route's key.
func (in *InboxActor) receiptAccept(m messages.Mail, sender string) (*messages.AcceptSend, error) {
	send, cid := messages.ReceiptSend(m, sender, "")
	return messages.NewAccept(in.cfg.Slug, send, cid, ulid.Make().String(), time.Now().UnixMilli(), in.cfg.Identity.SendFrame)
}

// expireHeld is the inbox actor's timer: a contact request the route holds
// runs out.
type expireHeld struct{}

const (
	// expiredBatch bounds the messages one look at run-out contact
	// requests takes; a full batch is followed by another at once.
	expiredBatch = 100
	// expiryRetry is how soon a look that failed is tried again.
	expiryRetry = time.Minute
	// maxExpiryWait caps the timer: a longer wait is taken in steps, each
	// looking again (a clock set back loses at most this).
	maxExpiryWait = time.Hour
)

// expireAt sets the timer for a contact request that runs out at (Unix
// ms), unless one is set for no later.
func (in *InboxActor) expireAt(ctx actor.Context, at int64) {
	if in.expiryAt != 0 && in.expiryAt <= at {
		return
	}
	if in.expiry != nil {
		in.expiry.Stop()
	}
	wait := min(max(time.Until(time.UnixMilli(at)), 0), maxExpiryWait)
	in.expiry, in.expiryAt = workers.SendLater(ctx, wait, &expireHeld{}), at
}

// expireRequests tells the senders of the messages this route held as
// contact requests that ran out that they were refused
// (ReasonRequestExpired), and only then deletes the messages: a notice is
// queued under an id derived from the message (messages.ReceiptID), so
// that a look cut short and taken again tells each sender once. It runs
// when the inbox actor starts, and then when the earliest request still
// held runs out. A look asked for while one is under way is taken once
// that one ends: a request held meanwhile may have run out since it listed.
func (in *InboxActor) expireRequests(ctx actor.Context) {
	if in.expiring {
		in.again = true
		return
	}
	in.expiring = true
	now := time.Now().UnixMilli()
	ask := &messages.ListExpiredRequests{Mesh: in.cfg.Slug, Now: now, Limit: expiredBatch}
	ctx.ReenterAfter(ctx.RequestFuture(in.store, ask, StoreTimeout), func(res any, err error) {
		r, err := answerOf[*messages.ExpiredRequests](res, err)
		if err != nil {
			in.log.Error("list run-out contact requests", "err", err)
			in.expiring, in.again = false, false
			in.expireAt(ctx, time.Now().Add(expiryRetry).UnixMilli())
			return
		}
		in.noticeExpired(ctx, r, now)
	})
}

// noticeExpired queues the notices of the run-out requests r lists, then
// deletes the messages whose notice is queued and sets the timer again.
func (in *InboxActor) noticeExpired(ctx actor.Context, r *messages.ExpiredRequests, now int64) {
	next := r.Next
	if len(r.Items) == expiredBatch {
		next = now // more ran out
	}
	var told []string
	left := len(r.Items)
	finish := func() {
		in.expiring = false
		switch {
		case in.again:
			in.again, next = false, time.Now().UnixMilli()
		case len(told) < len(r.Items):
			next = time.Now().Add(expiryRetry).UnixMilli()
		}
		if next != 0 {
			in.expireAt(ctx, next)
		}
	}
	drop := func() {
		if len(told) == 0 {
			finish()
			return
		}
		cmd := &messages.DropExpiredRequests{Mesh: in.cfg.Slug, IDs: told, Now: now}
		ctx.ReenterAfter(ctx.RequestFuture(in.store, cmd, StoreTimeout), func(res any, err error) {
			if _, err := answerOf[*messages.RequestsDropped](res, err); err != nil {
				in.log.Error("drop run-out contact requests", "err", err)
				told = nil // looked at again
			}
			finish()
		})
	}
	if left == 0 {
		drop()
		return
	}
	for _, it := range r.Items {
		m := messages.Mail{Receipt: messages.ReceiptRefused, ReceiptFor: it.ClientMessageID, Reason: messages.ReasonRequestExpired,
			Name: in.cfg.Name}
		cmd, err := in.receiptAccept(m, it.Sender)
		if err != nil {
			in.log.Error("run-out contact request's notice", "client_message_id", it.ClientMessageID, "err", err)
			if left--; left == 0 {
				drop()
			}
			continue
		}
		ctx.ReenterAfter(ctx.RequestFuture(in.store, cmd, StoreTimeout), func(res any, err error) {
			if _, err = answerOf[*messages.AcceptResult](res, err); err != nil {
				in.log.Error("run-out contact request's notice not queued", "client_message_id", it.ClientMessageID, "err", err)
			} else {
				told = append(told, it.ID)
			}
			if left--; left == 0 {
				drop()
			}
		})
	}
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
