package actors

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// File reservations on a mesh's broker link
// (messages/reservation_frames.go), relayed as locks are
// (brokerconn_locks.go, with the same claims): the IPC's requests go out
// as frames correlated by _reqId. A reserve with a wait that is refused is
// parked, and tried again when the broker pushes a release in its
// repository, when the first reservation in its way runs out, or every
// resvRetryCap, until the wait is over.
//
// A session's connection keeps the grants it was given: it renews each at
// a third of its TTL, and at least every messages.ReservationRenewEvery
// (the broker counts a holder unheard for longer than its threshold as
// gone), at once after a reconnect; it reports a renewal the broker
// refuses, or a force another holder pushed, as the event
// reservation_lost; it releases them all when the session ends.
// Reservations made outside a session last their TTL. Every transition is
// recorded by the store, as a lock's is.
type reservationsRelay struct {
	b *BrokerConn
	claims[string, *messages.ReservationRequest, *heldGrant]
	grants map[*heldGrant]bool
}

// reservationIDs prefixes the _reqId of a reservation request.
const reservationIDs = "rv"

// resvRetryCap bounds a parked reserve's wait between tries.
const resvRetryCap = time.Second

// heldGrant is a grant a session's connection renews.
type heldGrant struct {
	repo     string
	fence    int64
	ttl      time.Duration
	patterns []string
	timer    *time.Timer
}

// LogValue names the grant in a log line.
func (g *heldGrant) LogValue() slog.Value {
	return slog.GroupValue(slog.String("repo", g.repo), slog.Int64("fence_token", g.fence))
}

type resvCall = claim[*messages.ReservationRequest, *heldGrant]

// Reservation timers.
type (
	resvExpired struct{ id string }
	resvRetry   struct{ call *resvCall }
	resvRenewal struct{ grant *heldGrant }
)

func newReservationsRelay(b *BrokerConn) *reservationsRelay {
	waiting := func(n int) { b.metrics.Waiting.WithLabelValues(b.cfg.Slug, "reservation").Set(float64(n)) }
	return &reservationsRelay{b: b, claims: newClaims[string, *messages.ReservationRequest, *heldGrant](b.log, "reservation", waiting),
		grants: map[*heldGrant]bool{}}
}

func (r *reservationsRelay) routes() relayRoutes {
	return relayRoutes{ids: reservationIDs,
		messages: []route{on(r.request), on(r.expired), on(r.retry), on(r.renewal), on(r.restore), on(r.recorded)},
		frames:   []route{on(r.result), on(r.released), on(r.listed), on(r.checked)},
		refused:  r.refused,
		start:    r.start,
		up:       r.renewAll,
		down:     r.down,
		end:      r.releaseAll,
	}
}

// start asks the store for the grants a session's route kept (a daemon
// restart, or this actor's): they are renewed once the link is up.
func (r *reservationsRelay) start(ctx actor.Context) {
	if r.b.cfg.Session != nil {
		ctx.Request(r.b.store, &messages.HeldReservations{Route: r.b.cfg.Slug})
	}
}

// request sends the request's frame, after checking that the broker has
// reservations.
func (r *reservationsRelay) request(ctx actor.Context, m *messages.ReservationRequest) {
	call := &resvCall{who: ctx.Sender(), req: m}
	if m.Wait > 0 {
		call.deadline = time.Now().Add(m.Wait)
	}
	if r.b.lacks(wsclient.AbilityReservations) {
		ctx.Send(call.who, &messages.ReservationReply{Err: messages.ReservationsUnsupported(r.b.cfg.Slug)})
		return
	}
	r.send(ctx, call)
}

func (r *reservationsRelay) send(ctx actor.Context, call *resvCall) {
	m := call.req
	id := r.calls.call(reservationIDs, call)
	var frame any
	switch g := call.renewal; {
	case g != nil:
		frame = &messages.ReservationRenewFrame{Type: messages.TypeReservationRenew, Repo: g.repo, FenceToken: g.fence,
			TTLMs: g.ttl.Milliseconds(), ReqID: id}
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
	if err := r.b.send(frame); err != nil {
		r.calls.take(id)
		r.answer(ctx, call, &messages.ReservationReply{Err: err})
		return
	}
	workers.SendLater(ctx, messages.ReservationTimeout, &resvExpired{id: id})
}

// result answers a reserve or a renewal. A session's grant is kept for
// renewal; a refused reserve with time left is parked.
func (r *reservationsRelay) result(ctx actor.Context, f *messages.ReservationResultFrame) {
	call, ok := r.calls.take(f.ReqID)
	if !ok {
		if call, late := r.takeLate(f.ReqID); late && f.Granted {
			r.giveBack(ctx, call, f)
		}
		return
	}
	if g := call.renewal; g != nil {
		if r.grants[g] {
			g.timer = workers.SendLater(ctx, renewEvery(g.ttl), &resvRenewal{grant: g})
		}
		return
	}
	if r.gone(ctx, call) { // its caller went away: nothing is held for no one
		if f.Granted {
			r.giveBack(ctx, call, f)
		}
		return
	}
	if !f.Granted && time.Now().Before(call.deadline) {
		expiries := make([]string, len(f.Conflicts))
		for i, c := range f.Conflicts {
			expiries[i] = c.ExpiresAt
		}
		r.park(ctx, f.Repo, call, resvRetryCap, &resvRetry{call: call}, expiries...)
		return
	}
	reply := &messages.ReservationReply{Result: f}
	if !f.Granted {
		r.answer(ctx, call, reply)
		return
	}
	g := &heldGrant{repo: f.Repo, fence: f.FenceToken, ttl: call.req.TTL, patterns: call.req.Patterns}
	if r.b.cfg.Session != nil {
		r.drop(ctx, f.Repo, call.req.Patterns, messages.LockKindReleased) // moved to this grant
		g.timer = workers.SendLater(ctx, renewEvery(g.ttl), &resvRenewal{grant: g})
		r.grants[g] = true
	}
	r.record(ctx, g, messages.LockKindAcquired, g.patterns, nil, call, reply)
}

// giveBack releases a grant the broker made after its caller was told
// the reserve timed out: no one holds it. Both transitions are recorded
// (the release by its answer).
func (r *reservationsRelay) giveBack(ctx actor.Context, call *resvCall, f *messages.ReservationResultFrame) {
	r.log.Warn("reservation_granted_late", "repo", f.Repo, "fence_token", f.FenceToken,
		"detail", "the broker granted a reserve whose caller had gone (told it timed out, or away): released")
	g := &heldGrant{repo: f.Repo, fence: f.FenceToken, ttl: call.req.TTL, patterns: call.req.Patterns}
	r.record(ctx, g, messages.LockKindAcquired, g.patterns, nil, nil, nil)
	r.send(ctx, &resvCall{req: &messages.ReservationRequest{Op: messages.TypeReservationRelease, Repo: f.Repo, Patterns: g.patterns}})
}

// renewEvery is how often a grant of ttl is renewed.
func renewEvery(ttl time.Duration) time.Duration { return min(ttl/3, messages.ReservationRenewEvery) }

// released answers a release, or takes a release the broker pushed:
// another connection released, or forced ours.
func (r *reservationsRelay) released(ctx actor.Context, f *messages.ReservationReleasedFrame) {
	if f.ReqID == "" {
		r.pushed(ctx, f)
		return
	}
	call, ok := r.takeAnswered(f.ReqID)
	if !ok {
		return
	}
	freed := r.drop(ctx, f.Repo, f.Patterns, messages.LockKindReleased)
	if len(freed) > 0 { // not a grant this connection renews: a member's, recorded as the broker names them
		fences := map[string]int64{}
		for i, p := range f.Patterns {
			if i < len(f.FenceTokens) { // an older broker's answer names no fence tokens
				fences[p] = f.FenceTokens[i]
			}
		}
		byFence := map[int64][]string{}
		for _, p := range freed {
			byFence[fences[p]] = append(byFence[fences[p]], p)
		}
		for fence, patterns := range byFence {
			r.record(ctx, &heldGrant{repo: f.Repo, fence: fence}, messages.LockKindReleased, patterns, nil, nil, nil)
		}
	}
	r.answer(ctx, call, &messages.ReservationReply{Released: f.Patterns})
}

// pushed retries the parked reserves of the repository, and forgets the
// patterns of a grant another holder forced released.
func (r *reservationsRelay) pushed(ctx actor.Context, f *messages.ReservationReleasedFrame) {
	if f.ForcedBy != "" && f.Holder == r.b.cfg.Identity.PublicKeyHex() {
		r.drop(ctx, f.Repo, f.Patterns, messages.LockKindLost)
		r.b.event(ctx, "reservation_lost", map[string]any{"mesh": r.b.cfg.Slug, "repo": f.Repo, "patterns": f.Patterns, "forced_by": f.ForcedBy})
	}
	for _, call := range r.unpark(ctx, f.Repo) {
		r.send(ctx, call)
	}
}

func (r *reservationsRelay) listed(ctx actor.Context, f *messages.ReservationListFrame) {
	if call, ok := r.calls.take(f.ReqID); ok {
		r.answer(ctx, call, &messages.ReservationReply{List: f.Reservations})
	}
}

func (r *reservationsRelay) checked(ctx actor.Context, f *messages.ReservationCheckResultFrame) {
	if call, ok := r.calls.take(f.ReqID); ok {
		r.answer(ctx, call, &messages.ReservationReply{Check: f.Conflicts})
	}
}

// drop stops renewing patterns of repo — released, moved to a new grant,
// or lost — and records each held grant's share of them as kind: a grant
// left with none is forgotten, one left with some keeps those. It returns
// the patterns no held grant had.
func (r *reservationsRelay) drop(ctx actor.Context, repo string, patterns []string, kind string) []string {
	rest := slices.Clone(patterns)
	for g := range r.grants {
		if g.repo != repo {
			continue
		}
		var gone []string
		g.patterns = slices.DeleteFunc(g.patterns, func(p string) bool {
			if slices.Contains(patterns, p) {
				gone = append(gone, p)
				return true
			}
			return false
		})
		if len(gone) == 0 {
			continue
		}
		rest = slices.DeleteFunc(rest, func(p string) bool { return slices.Contains(gone, p) })
		if len(g.patterns) == 0 {
			r.forget(g)
		}
		r.record(ctx, g, kind, gone, g.patterns, nil, nil)
	}
	return rest
}

// forget stops renewing a grant.
func (r *reservationsRelay) forget(g *heldGrant) {
	if g.timer != nil {
		g.timer.Stop()
	}
	delete(r.grants, g)
}

// retry tries a parked reserve again, unless a release already did.
func (r *reservationsRelay) retry(ctx actor.Context, m *resvRetry) {
	if r.unparkOne(ctx, m.call.req.Repo, m.call) {
		r.send(ctx, m.call)
	}
}

func (r *reservationsRelay) refused(ctx actor.Context, id string, f *messages.ErrorFrame) bool {
	call, ok := r.calls.take(id)
	if !ok {
		return false
	}
	var err error
	switch f.Code {
	case messages.CodeReservationNotHeld:
		if g := call.renewal; g != nil && r.grants[g] {
			r.forget(g)
			r.record(ctx, g, messages.LockKindLost, g.patterns, nil, nil, nil)
			r.b.event(ctx, "reservation_lost", map[string]any{"mesh": r.b.cfg.Slug, "repo": g.repo, "patterns": g.patterns,
				"fence_token": g.fence, "reason": f.Message})
		}
		err = &messages.Error{Status: http.StatusConflict, Code: f.Code, Detail: "the broker refused it: " + f.Message}
	case messages.CodeTooManyReservations:
		err = &messages.Error{Status: http.StatusConflict, Code: f.Code, Detail: fmt.Sprintf("the broker refused it: %s "+
			"(at most %d standing in one repository, a member's and its sessions' together)", f.Message, messages.MaxReservationsPerMember)}
	case messages.CodeInvalidPattern, messages.CodeInvalidPath, messages.CodeInvalidReservationRepo, messages.CodeInvalidReservationTTL,
		messages.CodeTooManyPatterns, messages.CodeTooManyPaths, messages.CodeInvalidFence:
		err = refusedInput(f.Code, f)
	case "revoked":
		err = r.b.revokedError()
	default:
		err = r.b.brokerRefused(f)
	}
	r.answer(ctx, call, &messages.ReservationReply{Err: err})
	return true
}

func (r *reservationsRelay) expired(ctx actor.Context, m *resvExpired) {
	r.claims.expired(ctx, m.id, func(call *resvCall) failure {
		return &messages.ReservationReply{Err: messages.BrokerTimedOut(r.b.cfg.Slug, call.req.Op, messages.ReservationTimeout)}
	})
}

// down fails every request in flight and every parked reserve: the link
// is gone. Grants stay, to be renewed on reconnect.
func (r *reservationsRelay) down(ctx actor.Context) {
	r.claims.down(ctx, func() failure { return &messages.ReservationReply{Err: ErrNotConnected} })
}

// renewal sends the renewal of a held grant (not while the link is down:
// every grant is renewed on reconnect).
func (r *reservationsRelay) renewal(ctx actor.Context, m *resvRenewal) {
	g := m.grant
	if !r.grants[g] || r.b.conn == nil {
		return
	}
	r.send(ctx, &resvCall{renewal: g, req: &messages.ReservationRequest{Op: messages.TypeReservationRenew, Repo: g.repo}})
}

// renewAll renews every held grant at once (after a reconnect).
func (r *reservationsRelay) renewAll(ctx actor.Context) {
	for g := range r.grants {
		if g.timer != nil {
			g.timer.Stop()
		}
		r.renewal(ctx, &resvRenewal{grant: g})
	}
}

// releaseAll releases every held grant as the session ends: one release
// of all the session's reservations per repository, queued before the
// connection's close (one lost runs out with its TTL), or, with the broker
// out of reach, abandoned to their TTL.
func (r *reservationsRelay) releaseAll(ctx actor.Context) {
	var repos []string
	all := make([]*heldGrant, 0, len(r.grants))
	for g := range r.grants {
		if !slices.Contains(repos, g.repo) {
			repos = append(repos, g.repo)
		}
		all = append(all, g)
	}
	kind := messages.LockKindAbandoned
	for _, repo := range repos {
		if r.b.conn != nil && r.b.send(&messages.ReservationReleaseFrame{Type: messages.TypeReservationRelease, Repo: repo}) == nil {
			kind = messages.LockKindReleased
		}
	}
	for _, g := range all {
		r.forget(g)
		r.record(ctx, g, kind, g.patterns, nil, nil, nil)
	}
}

// record has the store record a transition of g's patterns (and keep a
// session's acquired grant, or narrow it to remaining); call, when set,
// is answered reply once it is committed.
func (r *reservationsRelay) record(ctx actor.Context, g *heldGrant, kind string, patterns, remaining []string, call *resvCall,
	reply *messages.ReservationReply) {
	ctx.Request(r.b.store, &messages.RecordReservation{ID: r.claims.record(call, reply), Route: r.b.cfg.Slug, Mesh: r.b.cfg.MeshID,
		Holder: r.b.cfg.Identity.PublicKeyHex(), Repo: g.repo, Fence: g.fence, Patterns: patterns, Remaining: slices.Clone(remaining),
		TTL: g.ttl, Kind: kind, Keep: r.b.cfg.Session != nil, Now: time.Now().UnixMilli()})
}

func (r *reservationsRelay) recorded(ctx actor.Context, m *messages.ReservationRecorded) {
	r.claims.recorded(ctx, m.ID, m.Err)
}

// restore takes back the grants the store kept for this session's route.
func (r *reservationsRelay) restore(ctx actor.Context, m *messages.HeldReservationList) {
	if m.Err != nil {
		r.log.Warn("read_held_reservations", "err", m.Err) // they run out
		return
	}
	for _, h := range m.Grants {
		g := &heldGrant{repo: h.Repo, fence: h.Fence, ttl: h.TTL, patterns: h.Patterns}
		r.grants[g] = true
		r.renewal(ctx, &resvRenewal{grant: g})
	}
}
