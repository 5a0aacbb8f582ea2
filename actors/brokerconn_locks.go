package actors

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// Fenced locks on a mesh's broker link (messages/lock_frames.go). The
// IPC's requests are relayed as frames correlated by _reqId. An acquire
// with a wait is parked while another holds the lock and tried again when
// the broker pushes its release, when the holder's lock runs out, or every
// lockRetryCap, until the wait is over.
//
// A session's connection keeps the locks it was granted, in outbox.db too:
// it renews each at a third of its TTL (at once after a reconnect, and
// after a daemon restart, which reads them back), reports a renewal the
// broker refuses as the event lock_lost, and releases them all when the
// session ends (end, before its subtree stops; a daemon that stops
// releases nothing). A lock taken outside a session (the member's
// connection) is not renewed: it lasts its TTL unless renewed or taken
// again. Every transition — acquired, released, lost, abandoned — is
// recorded by the store as an audit entry, and the caller is answered once
// it is (a lock its caller was told of is in the audit log and, for a
// session, renewed after a restart).
type locksRelay struct {
	b *BrokerConn
	claims[lockName, *messages.LockRequest, *heldLock]
	held map[lockName]*heldLock
}

// lockIDs prefixes the _reqId of a lock request.
const lockIDs = "lk"

// lockRetryCap bounds a parked acquire's wait between tries, for a release
// pushed by another broker replica, which this connection does not hear.
const lockRetryCap = time.Second

// lockName is a lock's identity on its mesh.
type lockName struct{ repo, key string }

// heldLock is a lock a session's connection renews.
type heldLock struct {
	name  lockName
	fence int64
	ttl   time.Duration
	timer *time.Timer
}

// LogValue names the lock in a log line.
func (h *heldLock) LogValue() slog.Value {
	return slog.GroupValue(slog.String("key", h.name.key), slog.String("repo", h.name.repo), slog.Int64("fence_token", h.fence))
}

type lockCall = claim[*messages.LockRequest, *heldLock]

// Lock timers.
type (
	lockExpired struct{ id string }
	lockRetry   struct{ call *lockCall }
	lockRenewal struct{ name lockName }
)

func newLocksRelay(b *BrokerConn) *locksRelay {
	waiting := func(n int) { b.metrics.Waiting.WithLabelValues(b.cfg.Slug, "lock").Set(float64(n)) }
	return &locksRelay{b: b, claims: newClaims[lockName, *messages.LockRequest, *heldLock](b.log, "lock", waiting),
		held: map[lockName]*heldLock{}}
}

func (r *locksRelay) routes() relayRoutes {
	return relayRoutes{ids: lockIDs,
		messages: []route{on(r.request), on(r.expired), on(r.retry), on(r.renewal), on(r.restore), on(r.recorded)},
		frames:   []route{on(r.result), on(r.released), on(r.listed)},
		refused:  r.refused,
		start:    r.start,
		up:       r.renewAll,
		down:     r.down,
		end:      r.releaseAll,
	}
}

// start asks the store for the locks a session's route kept (a daemon
// restart, or this actor's): they are renewed once the link is up.
func (r *locksRelay) start(ctx actor.Context) {
	if r.b.cfg.Session != nil {
		ctx.Request(r.b.store, &messages.HeldLocks{Route: r.b.cfg.Slug})
	}
}

// request sends the request's frame, after checking that the broker has
// locks.
func (r *locksRelay) request(ctx actor.Context, m *messages.LockRequest) {
	call := &lockCall{who: ctx.Sender(), req: m}
	if m.Wait > 0 {
		call.deadline = time.Now().Add(m.Wait)
	}
	if r.b.lacks(wsclient.AbilityLocks) {
		ctx.Send(call.who, &messages.LockReply{Err: &messages.Error{Status: http.StatusNotImplemented, Code: "locks_unsupported",
			Detail: fmt.Sprintf("the broker of mesh %s has no locks (it is upstream's, or older): run claudemesh-go's broker for them", r.b.cfg.Slug)}})
		return
	}
	r.send(ctx, call)
}

func (r *locksRelay) send(ctx actor.Context, call *lockCall) {
	m := call.req
	id := r.calls.call(lockIDs, call)
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
	if err := r.b.send(frame); err != nil {
		r.calls.take(id)
		r.answer(ctx, call, &messages.LockReply{Err: err})
		return
	}
	workers.SendLater(ctx, messages.LockTimeout, &lockExpired{id: id})
}

// result answers an acquire or a renewal. A granted lock of a session is
// kept for renewal; a refused acquire with time left is parked.
func (r *locksRelay) result(ctx actor.Context, f *messages.LockResultFrame) {
	call, ok := r.calls.take(f.ReqID)
	if !ok {
		if call, late := r.takeLate(f.ReqID); late && f.Granted {
			r.giveBack(ctx, call, f)
		}
		return
	}
	name := lockName{call.req.Repo, call.req.Key}
	if r.gone(ctx, call) { // its caller went away: nothing is held for no one
		if f.Granted {
			r.giveBack(ctx, call, f)
		}
		return
	}
	if !f.Granted && time.Now().Before(call.deadline) {
		r.park(ctx, name, call, lockRetryCap, &lockRetry{call: call}, f.ExpiresAt)
		return
	}
	lock := f.LockInfo
	reply := &messages.LockReply{Granted: f.Granted, Lock: &lock}
	if f.Granted {
		r.keep(ctx, name, f.FenceToken, call.req.TTL)
		if !call.renewing() {
			r.record(ctx, name, f.FenceToken, call.req.TTL, messages.LockKindAcquired, call, reply)
			return
		}
	}
	r.answer(ctx, call, reply)
}

// giveBack releases a lock the broker granted after its caller was told
// the acquire timed out: no one holds it. Both transitions are recorded.
func (r *locksRelay) giveBack(ctx actor.Context, call *lockCall, f *messages.LockResultFrame) {
	name := lockName{call.req.Repo, call.req.Key}
	r.log.Warn("lock_granted_late", "key", name.key, "repo", name.repo, "fence_token", f.FenceToken,
		"detail", "the broker granted an acquire whose caller had gone (told it timed out, or away): released")
	r.record(ctx, name, f.FenceToken, call.req.TTL, messages.LockKindAcquired, nil, nil)
	r.send(ctx, &lockCall{req: &messages.LockRequest{Op: messages.TypeLockRelease, Key: name.key, Repo: name.repo, Fence: f.FenceToken}})
}

// released answers a release, or retries the acquires parked on a lock
// whose release the broker pushed (another connection released it).
func (r *locksRelay) released(ctx actor.Context, f *messages.LockReleasedFrame) {
	name := lockName{f.Repo, f.Key}
	if f.ReqID == "" {
		for _, call := range r.unpark(ctx, name) {
			r.send(ctx, call)
		}
		return
	}
	call, ok := r.takeAnswered(f.ReqID)
	if !ok {
		return
	}
	r.forget(name)
	reply := &messages.LockReply{Released: f.Released}
	if f.Released { // an older broker's answer names no fence token
		r.record(ctx, name, cmp.Or(f.FenceToken, call.req.Fence), 0, messages.LockKindReleased, call, reply)
	} else {
		r.answer(ctx, call, reply)
	}
}

func (r *locksRelay) listed(ctx actor.Context, f *messages.LockListFrame) {
	if call, ok := r.calls.take(f.ReqID); ok {
		r.answer(ctx, call, &messages.LockReply{Locks: f.Locks})
	}
}

// retry tries a parked acquire again, unless a release already did.
func (r *locksRelay) retry(ctx actor.Context, m *lockRetry) {
	if r.unparkOne(ctx, lockName{m.call.req.Repo, m.call.req.Key}, m.call) {
		r.send(ctx, m.call)
	}
}

func (r *locksRelay) refused(ctx actor.Context, id string, f *messages.ErrorFrame) bool {
	call, ok := r.calls.take(id)
	if !ok {
		return false
	}
	var err error
	switch f.Code {
	case messages.CodeLockNotHeld:
		name := lockName{call.req.Repo, call.req.Key}
		if h, ok := r.held[name]; ok && h.fence == call.req.Fence {
			r.forget(name)
			r.record(ctx, name, h.fence, 0, messages.LockKindLost, nil, nil)
			r.b.event(ctx, "lock_lost", map[string]any{"mesh": r.b.cfg.Slug, "key": name.key, "repo": name.repo, "fence_token": h.fence})
		}
		err = messages.LockNotHeld(r.b.cfg.Slug, call.req.Key)
	case messages.CodeInvalidLockKey, messages.CodeInvalidLockRepo, messages.CodeInvalidLockTTL, messages.CodeInvalidFence:
		err = refusedInput(f.Code, f)
	case "revoked":
		err = r.b.revokedError()
	default:
		err = r.b.brokerRefused(f)
	}
	r.answer(ctx, call, &messages.LockReply{Err: err})
	return true
}

func (r *locksRelay) expired(ctx actor.Context, m *lockExpired) {
	r.claims.expired(ctx, m.id, func(*lockCall) failure {
		return &messages.LockReply{Err: &messages.Error{Status: http.StatusGatewayTimeout, Code: "lock_timeout",
			Detail: fmt.Sprintf("mesh %s: the broker did not answer the lock request in time (%s); retry, and check `claudemesh daemon status`",
				r.b.cfg.Slug, messages.LockTimeout)}}
	})
}

// down fails every request in flight and every parked acquire: the link
// is gone. Held locks stay held, to be renewed on reconnect.
func (r *locksRelay) down(ctx actor.Context) {
	r.claims.down(ctx, func() failure { return &messages.LockReply{Err: ErrNotConnected} })
}

// keep records a session's granted lock and schedules its renewal; the
// member's connection keeps nothing.
func (r *locksRelay) keep(ctx actor.Context, name lockName, fence int64, ttl time.Duration) {
	if r.b.cfg.Session == nil {
		return
	}
	r.forget(name)
	r.held[name] = &heldLock{name: name, fence: fence, ttl: ttl, timer: workers.SendLater(ctx, ttl/3, &lockRenewal{name: name})}
}

// forget stops renewing a lock.
func (r *locksRelay) forget(name lockName) {
	if h, ok := r.held[name]; ok {
		if h.timer != nil {
			h.timer.Stop()
		}
		delete(r.held, name)
	}
}

// renewal sends the renewal of a held lock (not while the link is down:
// every held lock is renewed on reconnect); the answer reschedules it.
func (r *locksRelay) renewal(ctx actor.Context, m *lockRenewal) {
	h, ok := r.held[m.name]
	if !ok || r.b.conn == nil {
		return
	}
	r.send(ctx, &lockCall{renewal: h, req: &messages.LockRequest{Op: messages.TypeLockRenew, Key: h.name.key, Repo: h.name.repo,
		Fence: h.fence, TTL: h.ttl}})
}

// renewAll renews every held lock at once (after a reconnect: some may be
// near their end).
func (r *locksRelay) renewAll(ctx actor.Context) {
	for name := range r.held {
		r.renewal(ctx, &lockRenewal{name: name})
	}
}

// restore takes back the locks the store kept for this session's route.
func (r *locksRelay) restore(ctx actor.Context, m *messages.HeldLockList) {
	if m.Err != nil {
		r.log.Warn("read_held_locks", "err", m.Err) // they run out
		return
	}
	for _, l := range m.Locks {
		name := lockName{l.Repo, l.Key}
		if _, ok := r.held[name]; !ok {
			r.held[name] = &heldLock{name: name, fence: l.Fence, ttl: l.TTL}
			r.renewal(ctx, &lockRenewal{name: name})
		}
	}
}

// releaseAll releases every held lock as the session ends, each release
// queued before the connection's close (a lock whose release is lost runs
// out with its TTL; one held while the broker is out of reach is
// abandoned to it).
func (r *locksRelay) releaseAll(ctx actor.Context) {
	for name, h := range r.held {
		kind := messages.LockKindAbandoned
		if r.b.conn != nil && r.b.send(&messages.LockReleaseFrame{Type: messages.TypeLockRelease, Key: name.key, Repo: name.repo,
			FenceToken: h.fence}) == nil {
			kind = messages.LockKindReleased
		}
		r.forget(name)
		r.record(ctx, name, h.fence, 0, kind, nil, nil)
	}
}

// record has the store record a transition (and keep a session's acquired
// lock); call, when set, is answered reply once it is committed.
func (r *locksRelay) record(ctx actor.Context, name lockName, fence int64, ttl time.Duration, kind string, call *lockCall,
	reply *messages.LockReply) {
	ctx.Request(r.b.store, &messages.RecordLock{ID: r.claims.record(call, reply), Route: r.b.cfg.Slug, Mesh: r.b.cfg.MeshID,
		Holder: r.b.cfg.Identity.PublicKeyHex(), Repo: name.repo, Key: name.key, Fence: fence, TTL: ttl, Kind: kind,
		Keep: r.b.cfg.Session != nil, Now: time.Now().UnixMilli()})
}

func (r *locksRelay) recorded(ctx actor.Context, m *messages.LockRecorded) {
	r.claims.recorded(ctx, m.ID, m.Err)
}
