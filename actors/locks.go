package actors

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// Fenced locks on a mesh's broker connection (messages/lock_frames.go).
// The IPC's requests are relayed as frames correlated by _reqId. An
// acquire with a wait is parked while another holds the lock and tried
// again when the broker pushes its release, when the holder's lock runs
// out, or every lockRetryCap, until the wait is over.
//
// A session's connection keeps the locks it was granted, in outbox.db too:
// it renews each at a third of its TTL (at once after a reconnect, and
// after a daemon restart, which reads them back), reports a renewal the
// broker refuses as the event lock_lost, and releases them all when the
// session ends (endHolds, before its subtree stops; a daemon that stops
// releases nothing). A lock taken outside a session (the member's
// connection) is not renewed: it lasts its TTL unless renewed or taken
// again. Every transition — acquired, released, lost, abandoned — is
// recorded by the store as an audit entry.

// lockRetryCap bounds a parked acquire's wait between tries, for a release
// pushed by another broker replica, which this connection does not hear.
const lockRetryCap = time.Second

// lockName is a lock's identity on its mesh.
type lockName struct{ repo, key string }

// lockCall is one request in flight: who asked, and for an acquire with a
// wait, until when it may be tried again.
type lockCall struct {
	who      *actor.PID
	req      *messages.LockRequest
	deadline time.Time
	renewal  bool // the connection's own renewal of a held lock
}

// heldLock is a lock a session's connection renews.
type heldLock struct {
	fence int64
	ttl   time.Duration
	timer *time.Timer
}

// Lock timers, and the end of a session's holds (Tree.Detach asks it
// before the subtree stops; the reply is *endedHolds).
type (
	lockExpired struct{ id string }
	lockRetry   struct{ call *lockCall }
	lockRenewal struct{ name lockName }
	endHolds    struct{}
	endedHolds  struct{}
)

// lockRequest sends the request's frame, after checking that the broker
// has locks.
func (b *BrokerConn) lockRequest(ctx actor.Context, m *messages.LockRequest) {
	call := &lockCall{who: ctx.Sender(), req: m}
	if m.Wait > 0 {
		call.deadline = time.Now().Add(m.Wait)
	}
	if b.lacks(wsclient.AbilityLocks) {
		ctx.Send(call.who, &messages.LockReply{Err: &messages.Error{Status: http.StatusNotImplemented, Code: "locks_unsupported",
			Detail: fmt.Sprintf("the broker of mesh %s has no locks (it is upstream's, or older): run claudemesh-go's broker for them", b.cfg.Slug)}})
		return
	}
	b.sendLock(ctx, call)
}

func (b *BrokerConn) sendLock(ctx actor.Context, call *lockCall) {
	m := call.req
	id := b.locks.call("lk", call)
	var frame any
	switch m.Op {
	case messages.TypeLockAcquire:
		frame = &messages.LockAcquireFrame{Type: m.Op, Key: m.Key, Repo: m.Repo, TTLMs: m.TTL.Milliseconds(), ReqID: id}
	case messages.TypeLockRenew:
		frame = &messages.LockRenewFrame{Type: m.Op, Key: m.Key, Repo: m.Repo, FenceToken: m.Fence, TTLMs: m.TTL.Milliseconds(), ReqID: id}
	case messages.TypeLockRelease:
		frame = &messages.LockReleaseFrame{Type: m.Op, Key: m.Key, Repo: m.Repo, FenceToken: m.Fence, ReqID: id}
	default:
		frame = &messages.ListLocksFrame{Type: messages.TypeListLocks, Repo: m.Repo, ReqID: id}
	}
	if err := b.send(frame); err != nil {
		b.locks.take(id)
		b.lockAnswer(ctx, call, &messages.LockReply{Err: err})
		return
	}
	workers.SendLater(ctx, messages.LockTimeout, &lockExpired{id: id})
}

// lockFrame takes a broker's lock frame, or an error frame answering a
// lock request; it reports false for a frame that is neither.
func (b *BrokerConn) lockFrame(ctx actor.Context, f any) bool {
	switch f := f.(type) {
	case *messages.LockResultFrame:
		if call, ok := b.locks.take(f.ReqID); ok {
			b.lockResult(ctx, call, f)
		}
	case *messages.LockReleasedFrame:
		if f.ReqID == "" { // pushed: another connection released it
			b.retryWaiters(ctx, lockName{f.Repo, f.Key})
		} else if call, ok := b.locks.take(f.ReqID); ok {
			name := lockName{f.Repo, f.Key}
			b.forget(name)
			reply := &messages.LockReply{Released: f.Released}
			if f.Released {
				b.recordLock(ctx, name, call.req.Fence, 0, messages.LockKindReleased, call, reply)
			} else {
				b.lockAnswer(ctx, call, reply)
			}
		}
	case *messages.LockListFrame:
		if call, ok := b.locks.take(f.ReqID); ok {
			b.lockAnswer(ctx, call, &messages.LockReply{Locks: f.Locks})
		}
	case *messages.ErrorFrame:
		call, ok := b.locks.take(cmp.Or(f.ReqID, f.ID))
		if !ok {
			return false
		}
		b.lockError(ctx, call, f)
	default:
		return false
	}
	return true
}

// lockResult answers an acquire or a renewal. A granted lock of a session
// is kept for renewal; a refused acquire with time left is parked.
func (b *BrokerConn) lockResult(ctx actor.Context, call *lockCall, f *messages.LockResultFrame) {
	name := lockName{call.req.Repo, call.req.Key}
	if !f.Granted && time.Now().Before(call.deadline) {
		workers.SendLater(ctx, b.lockWaiters.park(name, call, lockRetryCap, call.deadline, f.ExpiresAt), &lockRetry{call: call})
		return
	}
	lock := f.LockInfo
	reply := &messages.LockReply{Granted: f.Granted, Lock: &lock}
	if f.Granted {
		b.keep(ctx, name, f.FenceToken, call.req.TTL)
		if !call.renewal {
			b.recordLock(ctx, name, f.FenceToken, call.req.TTL, messages.LockKindAcquired, call, reply)
			return
		}
	}
	b.lockAnswer(ctx, call, reply)
}

// retryWaiters tries the parked acquires of name again.
func (b *BrokerConn) retryWaiters(ctx actor.Context, name lockName) {
	for _, call := range b.lockWaiters.take(name) {
		b.sendLock(ctx, call)
	}
}

// lockRetry tries a parked acquire again, unless a release already did.
func (b *BrokerConn) lockRetry(ctx actor.Context, m *lockRetry) {
	if b.lockWaiters.remove(lockName{m.call.req.Repo, m.call.req.Key}, m.call) {
		b.sendLock(ctx, m.call)
	}
}

func (b *BrokerConn) lockError(ctx actor.Context, call *lockCall, f *messages.ErrorFrame) {
	var err error
	switch f.Code {
	case messages.CodeLockNotHeld:
		name := lockName{call.req.Repo, call.req.Key}
		if h, ok := b.held[name]; ok && h.fence == call.req.Fence {
			b.forget(name)
			b.recordLock(ctx, name, h.fence, 0, messages.LockKindLost, nil, nil)
			b.event(ctx, "lock_lost", map[string]any{"mesh": b.cfg.Slug, "key": name.key, "repo": name.repo, "fence_token": h.fence})
		}
		err = messages.LockNotHeld(b.cfg.Slug, call.req.Key)
	case messages.CodeInvalidLockKey, messages.CodeInvalidLockRepo, messages.CodeInvalidLockTTL, messages.CodeInvalidFence:
		err = refusedInput(f.Code, f)
	case "revoked":
		err = &messages.Error{Status: http.StatusForbidden, Code: messages.CodeMemberRevoked,
			Detail: fmt.Sprintf("the broker of mesh %s refused this member's key as revoked: ask the mesh's operator for a new invite", b.cfg.Slug)}
	default:
		err = b.brokerRefused(f)
	}
	b.lockAnswer(ctx, call, &messages.LockReply{Err: err})
}

func (b *BrokerConn) lockExpired(ctx actor.Context, m *lockExpired) {
	if call, ok := b.locks.take(m.id); ok {
		b.lockAnswer(ctx, call, &messages.LockReply{Err: &messages.Error{Status: http.StatusGatewayTimeout, Code: "lock_timeout",
			Detail: fmt.Sprintf("mesh %s: the broker did not answer the lock request in time (%s); retry, and check `claudemesh daemon status`",
				b.cfg.Slug, messages.LockTimeout)}})
	}
}

// locksDown fails every request in flight and every parked acquire: the
// connection is gone. Held locks stay held, to be renewed on reconnect.
func (b *BrokerConn) locksDown(ctx actor.Context) {
	for _, call := range b.locks.drain() {
		b.lockAnswer(ctx, call, &messages.LockReply{Err: ErrNotConnected})
	}
	for _, call := range b.lockWaiters.drain() {
		b.lockAnswer(ctx, call, &messages.LockReply{Err: ErrNotConnected})
	}
}

func (b *BrokerConn) lockAnswer(ctx actor.Context, call *lockCall, reply *messages.LockReply) {
	if !call.renewal {
		ctx.Send(call.who, reply)
	} else if reply.Err != nil && reply.Err != ErrNotConnected {
		b.log.Warn("lock_renewal_failed", "key", call.req.Key, "repo", call.req.Repo, "err", reply.Err)
	}
}

// keep records a session's granted lock and schedules its renewal; the
// member's connection keeps nothing.
func (b *BrokerConn) keep(ctx actor.Context, name lockName, fence int64, ttl time.Duration) {
	if b.cfg.Session == nil {
		return
	}
	b.forget(name)
	b.held[name] = &heldLock{fence: fence, ttl: ttl, timer: workers.SendLater(ctx, ttl/3, &lockRenewal{name: name})}
}

// forget stops renewing a lock.
func (b *BrokerConn) forget(name lockName) {
	if h, ok := b.held[name]; ok {
		if h.timer != nil {
			h.timer.Stop()
		}
		delete(b.held, name)
	}
}

// renew sends the renewal of a held lock; the answer reschedules it.
func (b *BrokerConn) renew(ctx actor.Context, name lockName) {
	h, ok := b.held[name]
	if !ok {
		return
	}
	if b.conn == nil { // renewed on reconnect
		return
	}
	b.sendLock(ctx, &lockCall{renewal: true, req: &messages.LockRequest{Op: messages.TypeLockRenew, Key: name.key, Repo: name.repo,
		Fence: h.fence, TTL: h.ttl}})
}

// renewHeld renews every held lock at once (after a reconnect: some may
// be near their end).
func (b *BrokerConn) renewHeld(ctx actor.Context) {
	for name := range b.held {
		b.renew(ctx, name)
	}
}

// restoreHeld takes back the locks the store kept for this session's
// route (a daemon restart, or this actor's): they are renewed once the
// connection is up.
func (b *BrokerConn) restoreHeld(ctx actor.Context, m *messages.HeldLockList) {
	if m.Err != nil {
		b.log.Warn("read_held_locks", "err", m.Err) // they run out
		return
	}
	for _, l := range m.Locks {
		name := lockName{l.Repo, l.Key}
		if _, ok := b.held[name]; !ok {
			b.held[name] = &heldLock{fence: l.Fence, ttl: l.TTL}
			b.renew(ctx, name)
		}
	}
}

// endHolds releases every held lock (and reservation) as the session
// ends, and answers once the releases are queued before the connection's close (a lock whose
// release is lost runs out with its TTL; one held while the broker is out
// of reach is abandoned to it).
func (b *BrokerConn) endHolds(ctx actor.Context) {
	for name, h := range b.held {
		kind := messages.LockKindAbandoned
		if b.conn != nil && b.send(&messages.LockReleaseFrame{Type: messages.TypeLockRelease, Key: name.key, Repo: name.repo,
			FenceToken: h.fence}) == nil {
			kind = messages.LockKindReleased
		}
		b.forget(name)
		b.recordLock(ctx, name, h.fence, 0, kind, nil, nil)
	}
	b.endHeldGrants(ctx) // reservations.go
	ctx.Respond(&endedHolds{})
}

// recordLock has the store record a transition (and keep a session's
// acquired lock); call, when set, is answered reply once it is committed
// (lockRecorded), so that a lock its caller was told of is in the audit
// log and, for a session, renewed after a restart.
func (b *BrokerConn) recordLock(ctx actor.Context, name lockName, fence int64, ttl time.Duration, kind string, call *lockCall,
	reply *messages.LockReply) {
	b.nextRecord++
	if call != nil {
		b.recording[b.nextRecord] = pendingAnswer{call: call, reply: reply}
	}
	ctx.Request(b.store, &messages.RecordLock{ID: b.nextRecord, Route: b.cfg.Slug, Mesh: b.cfg.MeshID,
		Holder: b.cfg.Identity.PublicKeyHex(), Repo: name.repo, Key: name.key, Fence: fence, TTL: ttl, Kind: kind,
		Keep: b.cfg.Session != nil, Now: time.Now().UnixMilli()})
}

// pendingAnswer is a caller's answer waiting for its transition's record.
type pendingAnswer struct {
	call  *lockCall
	reply *messages.LockReply
}

// lockRecorded answers the caller whose transition the store recorded (a
// record that failed is logged: the lock is the broker's all the same).
func (b *BrokerConn) lockRecorded(ctx actor.Context, m *messages.LockRecorded) {
	if m.Err != nil {
		b.log.Warn("record_lock", "err", m.Err)
	}
	if p, ok := b.recording[m.ID]; ok {
		delete(b.recording, m.ID)
		b.lockAnswer(ctx, p.call, p.reply)
	} else {
		b.reservationRecorded(ctx, m.ID)
	}
}
