package actors

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// File reservations on a mesh's broker connection
// (messages/reservation_frames.go), relayed as locks are (locks.go): the
// IPC's requests go out as frames correlated by _reqId. A reserve with a
// wait that is refused is parked, and tried again when the broker pushes
// a release in its repository, when the first reservation in its way runs
// out, or every resvRetryCap, until the wait is over.
//
// A session's connection keeps the grants it was given: it renews each at
// a third of its TTL, and at least every messages.ReservationRenewEvery
// (the broker counts a holder unheard for longer than its threshold as
// gone), at once after a reconnect; it reports a renewal the broker
// refuses, or a force another holder pushed, as the event
// reservation_lost; it releases them all when the session ends (endHolds).
// Reservations made outside a session last their TTL.

// resvRetryCap bounds a parked reserve's wait between tries.
const resvRetryCap = time.Second

// resvCall is one reservation request in flight.
type resvCall struct {
	who      *actor.PID
	req      *messages.ReservationRequest
	deadline time.Time
	grant    *heldGrant // set for the connection's own renewal of a grant
}

// heldGrant is a grant a session's connection renews.
type heldGrant struct {
	repo     string
	fence    int64
	ttl      time.Duration
	patterns []string
	timer    *time.Timer
}

// Reservation timers.
type (
	resvExpired struct{ id string }
	resvRetry   struct{ call *resvCall }
	resvRenewal struct{ grant *heldGrant }
)

// reservationMessage handles a reservation request, timer or the store's
// kept grants; it reports false for a message of another kind.
func (b *BrokerConn) reservationMessage(ctx actor.Context, m any) bool {
	switch m := m.(type) {
	case *messages.ReservationRequest:
		b.reservationRequest(ctx, m)
	case *resvExpired:
		b.resvExpired(ctx, m)
	case *resvRetry:
		b.resvRetry(ctx, m)
	case *resvRenewal:
		b.renewGrant(ctx, m.grant)
	case *messages.HeldReservationList:
		b.restoreGrants(ctx, m)
	default:
		return false
	}
	return true
}

// reservationRequest sends the request's frame, after checking that the
// broker has reservations.
func (b *BrokerConn) reservationRequest(ctx actor.Context, m *messages.ReservationRequest) {
	call := &resvCall{who: ctx.Sender(), req: m}
	if m.Wait > 0 {
		call.deadline = time.Now().Add(m.Wait)
	}
	if b.lacks(wsclient.AbilityReservations) {
		ctx.Send(call.who, &messages.ReservationReply{Err: messages.ReservationsUnsupported(b.cfg.Slug)})
		return
	}
	b.sendReservation(ctx, call)
}

func (b *BrokerConn) sendReservation(ctx actor.Context, call *resvCall) {
	m := call.req
	id := b.resv.call("rv", call)
	var frame any
	switch {
	case call.grant != nil:
		frame = &messages.ReservationRenewFrame{Type: messages.TypeReservationRenew, Repo: call.grant.repo, FenceToken: call.grant.fence,
			TTLMs: call.grant.ttl.Milliseconds(), ReqID: id}
	case m.Op == messages.TypeReserve:
		frame = &messages.ReserveFrame{Type: m.Op, Repo: m.Repo, Patterns: m.Patterns, Exclusive: m.Exclusive, TTLMs: m.TTL.Milliseconds(),
			Force: m.Force, ReqID: id}
	case m.Op == messages.TypeReservationRelease:
		frame = &messages.ReservationReleaseFrame{Type: m.Op, Repo: m.Repo, Patterns: m.Patterns, ReqID: id}
	case m.Op == messages.TypeReservationCheck:
		frame = &messages.ReservationCheckFrame{Type: m.Op, Repo: m.Repo, Paths: m.Paths, ReqID: id}
	default:
		frame = &messages.ListReservationsFrame{Type: messages.TypeListReservations, Repo: m.Repo, ReqID: id}
	}
	if err := b.send(frame); err != nil {
		b.resv.take(id)
		b.reservationAnswer(ctx, call, &messages.ReservationReply{Err: err})
		return
	}
	workers.SendLater(ctx, messages.ReservationTimeout, &resvExpired{id: id})
}

// reservationFrame takes a broker's reservation frame, or an error frame
// answering a reservation request; it reports false for a frame that is
// neither.
func (b *BrokerConn) reservationFrame(ctx actor.Context, f any) bool {
	switch f := f.(type) {
	case *messages.ReservationResultFrame:
		if call, ok := b.resv.take(f.ReqID); ok {
			b.reservationResult(ctx, call, f)
		}
	case *messages.ReservationReleasedFrame:
		if f.ReqID == "" { // pushed: another connection released, or forced ours
			b.reservationsPushed(ctx, f)
		} else if call, ok := b.resv.take(f.ReqID); ok {
			b.endGrants(ctx, b.dropPatterns(f.Repo, f.Patterns), messages.LockKindReleased)
			b.reservationAnswer(ctx, call, &messages.ReservationReply{Released: f.Patterns})
		}
	case *messages.ReservationListFrame:
		if call, ok := b.resv.take(f.ReqID); ok {
			b.reservationAnswer(ctx, call, &messages.ReservationReply{List: f.Reservations})
		}
	case *messages.ReservationCheckResultFrame:
		if call, ok := b.resv.take(f.ReqID); ok {
			b.reservationAnswer(ctx, call, &messages.ReservationReply{Check: f.Conflicts})
		}
	case *messages.ErrorFrame:
		call, ok := b.resv.take(cmp.Or(f.ReqID, f.ID))
		if !ok {
			return false
		}
		b.reservationError(ctx, call, f)
	default:
		return false
	}
	return true
}

// reservationResult answers a reserve or a renewal. A session's grant is
// kept for renewal; a refused reserve with time left is parked.
func (b *BrokerConn) reservationResult(ctx actor.Context, call *resvCall, f *messages.ReservationResultFrame) {
	if g := call.grant; g != nil {
		if b.grants[g] {
			g.timer = workers.SendLater(ctx, renewEvery(g.ttl), &resvRenewal{grant: g})
		}
		return
	}
	if !f.Granted && time.Now().Before(call.deadline) {
		expiries := make([]string, len(f.Conflicts))
		for i, c := range f.Conflicts {
			expiries[i] = c.ExpiresAt
		}
		workers.SendLater(ctx, b.resvWaiters.park(f.Repo, call, resvRetryCap, call.deadline, expiries...), &resvRetry{call: call})
		return
	}
	reply := &messages.ReservationReply{Result: f}
	if !f.Granted {
		b.reservationAnswer(ctx, call, reply)
		return
	}
	g := &heldGrant{repo: f.Repo, fence: f.FenceToken, ttl: call.req.TTL, patterns: call.req.Patterns}
	if b.cfg.Session != nil {
		b.endGrants(ctx, b.dropPatterns(f.Repo, call.req.Patterns), messages.LockKindReleased) // moved to this grant
		g.timer = workers.SendLater(ctx, renewEvery(g.ttl), &resvRenewal{grant: g})
		b.grants[g] = true
	}
	b.recordReservation(ctx, g, messages.LockKindAcquired, call, reply)
}

// renewEvery is how often a grant of ttl is renewed.
func renewEvery(ttl time.Duration) time.Duration { return min(ttl/3, messages.ReservationRenewEvery) }

// reservationsPushed retries the parked reserves of the repository, and
// forgets the patterns of a grant another holder forced released.
func (b *BrokerConn) reservationsPushed(ctx actor.Context, f *messages.ReservationReleasedFrame) {
	if f.ForcedBy != "" && f.Holder == b.cfg.Identity.PublicKeyHex() {
		b.endGrants(ctx, b.dropPatterns(f.Repo, f.Patterns), messages.LockKindLost)
		b.event(ctx, "reservation_lost", map[string]any{"mesh": b.cfg.Slug, "repo": f.Repo, "patterns": f.Patterns, "forced_by": f.ForcedBy})
	}
	for _, call := range b.resvWaiters.take(f.Repo) {
		b.sendReservation(ctx, call)
	}
}

// dropPatterns stops renewing patterns of repo (none: all of them) —
// released, moved to a new grant, or lost — and returns the grants left
// with none.
func (b *BrokerConn) dropPatterns(repo string, patterns []string) []*heldGrant {
	var emptied []*heldGrant
	for g := range b.grants {
		if g.repo != repo {
			continue
		}
		g.patterns = slices.DeleteFunc(g.patterns, func(p string) bool { return len(patterns) == 0 || slices.Contains(patterns, p) })
		if len(g.patterns) == 0 {
			emptied = append(emptied, g)
		}
	}
	return emptied
}

func (b *BrokerConn) forgetGrant(g *heldGrant) {
	if g.timer != nil {
		g.timer.Stop()
	}
	delete(b.grants, g)
}

// resvRetry tries a parked reserve again, unless a release already did.
func (b *BrokerConn) resvRetry(ctx actor.Context, m *resvRetry) {
	if b.resvWaiters.remove(m.call.req.Repo, m.call) {
		b.sendReservation(ctx, m.call)
	}
}

func (b *BrokerConn) reservationError(ctx actor.Context, call *resvCall, f *messages.ErrorFrame) {
	var err error
	switch f.Code {
	case messages.CodeReservationNotHeld:
		if g := call.grant; g != nil && b.grants[g] {
			b.endGrants(ctx, []*heldGrant{g}, messages.LockKindLost)
			b.event(ctx, "reservation_lost", map[string]any{"mesh": b.cfg.Slug, "repo": g.repo, "patterns": g.patterns,
				"fence_token": g.fence, "reason": f.Message})
		}
		err = &messages.Error{Status: http.StatusConflict, Code: f.Code, Detail: "the broker refused it: " + f.Message}
	case messages.CodeInvalidPattern, messages.CodeInvalidPath, messages.CodeInvalidReservationRepo, messages.CodeInvalidReservationTTL,
		messages.CodeTooManyPatterns, messages.CodeTooManyPaths, messages.CodeInvalidFence:
		err = refusedInput(f.Code, f)
	case "revoked":
		err = &messages.Error{Status: http.StatusForbidden, Code: messages.CodeMemberRevoked,
			Detail: fmt.Sprintf("the broker of mesh %s refused this member's key as revoked: ask the mesh's operator for a new invite", b.cfg.Slug)}
	default:
		err = b.brokerRefused(f)
	}
	b.reservationAnswer(ctx, call, &messages.ReservationReply{Err: err})
}

func (b *BrokerConn) resvExpired(ctx actor.Context, m *resvExpired) {
	if call, ok := b.resv.take(m.id); ok {
		b.reservationAnswer(ctx, call, &messages.ReservationReply{Err: messages.BrokerTimedOut(b.cfg.Slug, call.req.Op,
			messages.ReservationTimeout)})
	}
}

// reservationsDown fails every request in flight and every parked
// reserve: the connection is gone. Grants stay, to be renewed on
// reconnect.
func (b *BrokerConn) reservationsDown(ctx actor.Context) {
	for _, call := range b.resv.drain() {
		b.reservationAnswer(ctx, call, &messages.ReservationReply{Err: ErrNotConnected})
	}
	for _, call := range b.resvWaiters.drain() {
		b.reservationAnswer(ctx, call, &messages.ReservationReply{Err: ErrNotConnected})
	}
}

func (b *BrokerConn) reservationAnswer(ctx actor.Context, call *resvCall, reply *messages.ReservationReply) {
	if call.grant == nil {
		ctx.Send(call.who, reply)
	} else if reply.Err != nil && reply.Err != ErrNotConnected {
		b.log.Warn("reservation_renewal_failed", "repo", call.grant.repo, "fence_token", call.grant.fence, "err", reply.Err)
	}
}

// renewGrant sends the renewal of a held grant (not while the link is
// down: every grant is renewed on reconnect).
func (b *BrokerConn) renewGrant(ctx actor.Context, g *heldGrant) {
	if !b.grants[g] || b.conn == nil {
		return
	}
	b.sendReservation(ctx, &resvCall{grant: g, req: &messages.ReservationRequest{Op: messages.TypeReservationRenew, Repo: g.repo}})
}

// renewGrants renews every held grant at once (after a reconnect).
func (b *BrokerConn) renewGrants(ctx actor.Context) {
	for g := range b.grants {
		if g.timer != nil {
			g.timer.Stop()
		}
		b.renewGrant(ctx, g)
	}
}

// endHeldGrants releases every held grant as the session ends: one
// release of all the session's reservations per repository, queued before
// the connection's close (one lost runs out with its TTL), or, with the
// broker out of reach, abandoned to their TTL.
func (b *BrokerConn) endHeldGrants(ctx actor.Context) {
	var repos []string
	all := make([]*heldGrant, 0, len(b.grants))
	for g := range b.grants {
		if !slices.Contains(repos, g.repo) {
			repos = append(repos, g.repo)
		}
		all = append(all, g)
	}
	kind := messages.LockKindAbandoned
	for _, repo := range repos {
		if b.conn != nil && b.send(&messages.ReservationReleaseFrame{Type: messages.TypeReservationRelease, Repo: repo}) == nil {
			kind = messages.LockKindReleased
		}
	}
	b.endGrants(ctx, all, kind)
}

// endGrants forgets grants and records how they ended.
func (b *BrokerConn) endGrants(ctx actor.Context, grants []*heldGrant, kind string) {
	for _, g := range grants {
		b.forgetGrant(g)
		b.recordReservation(ctx, g, kind, nil, nil)
	}
}

// recordReservation has the store record a grant's transition (and keep
// a session's acquired grant); call, when set, is answered reply once it
// is committed (lockRecorded).
func (b *BrokerConn) recordReservation(ctx actor.Context, g *heldGrant, kind string, call *resvCall, reply *messages.ReservationReply) {
	b.nextRecord++
	if call != nil {
		b.resvRecording[b.nextRecord] = pendingReservation{call: call, reply: reply}
	}
	ctx.Request(b.store, &messages.RecordReservation{ID: b.nextRecord, Route: b.cfg.Slug, Mesh: b.cfg.MeshID,
		Holder: b.cfg.Identity.PublicKeyHex(), Repo: g.repo, Fence: g.fence, Patterns: g.patterns, TTL: g.ttl, Kind: kind,
		Keep: b.cfg.Session != nil, Now: time.Now().UnixMilli()})
}

// pendingReservation is a caller's answer waiting for its grant's record.
type pendingReservation struct {
	call  *resvCall
	reply *messages.ReservationReply
}

// reservationRecorded answers the caller whose grant the store recorded
// under id, if any.
func (b *BrokerConn) reservationRecorded(ctx actor.Context, id uint64) {
	if p, ok := b.resvRecording[id]; ok {
		delete(b.resvRecording, id)
		b.reservationAnswer(ctx, p.call, p.reply)
	}
}

// restoreGrants takes back the grants the store kept for this session's
// route (a daemon restart, or this actor's): they are renewed once the
// connection is up.
func (b *BrokerConn) restoreGrants(ctx actor.Context, m *messages.HeldReservationList) {
	if m.Err != nil {
		b.log.Warn("read_held_reservations", "err", m.Err) // they run out
		return
	}
	for _, h := range m.Grants {
		g := &heldGrant{repo: h.Repo, fence: h.Fence, ttl: h.TTL, patterns: h.Patterns}
		b.grants[g] = true
		b.renewGrant(ctx, g)
	}
}
