package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// File reservations. A connection holds reservations as the key it sends
// with (a session its session key), as it holds locks; the store decides
// a grant atomically per repository (so that two replicas on one
// PostgreSQL database never grant conflicting reservations). A release,
// and a force over a holder gone past the threshold, is pushed as
// reservation_released to the mesh's connections, on this broker and (by
// the store's notification) the other replicas: waiters retry at once,
// and a forced holder that is still connected learns it.

// FeatureReservations is the reservation frames' feature.
const FeatureReservations = "reservations"

// reservationFrames are the reservation requests; a grant that forces
// and a release tell the hub, which pushes reservation_released.
var reservationFrames = frames{
	acts((*conn).reserve),
	answers((*conn).renewReservations),
	acts((*conn).releaseReservations),
	answers((*conn).listReservations),
	answers((*conn).checkReservations),
}

func (c *conn) reserve(ctx actor.Context, f *messages.ReserveFrame) {
	g, err := c.store.Reserve(context.Background(), c.mesh.ID, c.replica, broker.Reserve{Repo: f.Repo, Patterns: f.Patterns,
		Exclusive: f.Exclusive, TTL: time.Duration(f.TTLMs) * time.Millisecond, Force: f.Force, StaleAfter: c.reservationStale}, c.holder())
	if err != nil {
		c.reservationError(f.ReqID, err)
		return
	}
	out := &messages.ReservationResultFrame{Type: messages.TypeReservationResult, Granted: g.Granted, Repo: f.Repo, FenceToken: g.Fence,
		Reservations: reservationInfos(g.Reservations), Conflicts: make([]messages.ReservationConflict, len(g.Conflicts)),
		Forced: reservationInfos(g.Forced), ReqID: f.ReqID}
	for i, cf := range g.Conflicts {
		out.Conflicts[i] = messages.ReservationConflict{ReservationInfo: reservationInfo(&cf.Reservation), Yours: cf.Yours, Path: cf.Path,
			Stale: cf.Stale}
	}
	for holder, patterns := range byHolder(g.Forced) {
		ctx.Send(c.hub, &hubMeshPush{meshID: c.mesh.ID, except: c.id, frame: reservationsReleasedPush(f.Repo, patterns, holder, c.displayName())})
	}
	c.sendFrame(out)
}

func byHolder(rs []broker.Reservation) map[string][]string {
	out := map[string][]string{}
	for _, r := range rs {
		out[r.Holder] = append(out[r.Holder], r.Pattern)
	}
	return out
}

func (c *conn) renewReservations(f *messages.ReservationRenewFrame) {
	rs, err := c.store.RenewReservations(context.Background(), c.mesh.ID, f.Repo, f.FenceToken, time.Duration(f.TTLMs)*time.Millisecond,
		c.holder())
	if err != nil {
		c.reservationError(f.ReqID, err)
		return
	}
	c.sendFrame(&messages.ReservationResultFrame{Type: messages.TypeReservationResult, Granted: true, Repo: f.Repo, FenceToken: f.FenceToken,
		Reservations: reservationInfos(rs), Conflicts: []messages.ReservationConflict{}, ReqID: f.ReqID})
}

func (c *conn) releaseReservations(ctx actor.Context, f *messages.ReservationReleaseFrame) {
	released, err := c.store.ReleaseReservations(context.Background(), c.mesh.ID, c.replica, f.Repo, f.Patterns, c.holder())
	if err != nil {
		c.reservationError(f.ReqID, err)
		return
	}
	out := &messages.ReservationReleasedFrame{Type: messages.TypeReservationReleased, Repo: f.Repo, Patterns: make([]string, len(released)),
		FenceTokens: make([]int64, len(released)), ReqID: f.ReqID}
	for i, p := range released {
		out.Patterns[i], out.FenceTokens[i] = p.Pattern, p.Fence
	}
	if len(released) > 0 {
		ctx.Send(c.hub, &hubMeshPush{meshID: c.mesh.ID, except: c.id, frame: reservationsReleasedPush(f.Repo, out.Patterns, "", "")})
	}
	c.sendFrame(out)
}

// reservationsReleasedPush is the reservation_released frame told to the
// mesh's connections (holder and forcedBy set for a force).
func reservationsReleasedPush(repo string, patterns []string, holder, forcedBy string) []byte {
	push, _ := json.Marshal(&messages.ReservationReleasedFrame{Type: messages.TypeReservationReleased, Repo: repo, Patterns: patterns,
		Holder: holder, ForcedBy: forcedBy}) // always marshals
	return push
}

// listenReservations hands the other replicas' reservation releases to
// the hub until ctx is done (PostgreSQL; on SQLite there are none).
func listenReservations(ctx context.Context, d *deps, root *actor.RootContext) {
	startListening(ctx, d, "reservations", func(connected func()) {
		_ = d.store.ListenReservations(ctx, connected, func(r *broker.ReservationsReleased) {
			if r.Origin != d.replica {
				root.Send(d.hub, &hubMeshPush{meshID: r.MeshID, frame: reservationsReleasedPush(r.Repo, r.Patterns, r.Holder, r.ForcedBy)})
			}
		})
	})
}

func (c *conn) listReservations(f *messages.ListReservationsFrame) {
	rs, err := c.store.Reservations(context.Background(), c.mesh.ID, f.Repo)
	if err != nil {
		c.reservationError(f.ReqID, err)
		return
	}
	c.sendFrame(&messages.ReservationListFrame{Type: messages.TypeReservationList, Reservations: reservationInfos(rs), ReqID: f.ReqID})
}

func (c *conn) checkReservations(f *messages.ReservationCheckFrame) {
	found, err := c.store.CheckPaths(context.Background(), c.mesh.ID, f.Repo, f.Paths, c.holder())
	if err != nil {
		c.reservationError(f.ReqID, err)
		return
	}
	out := &messages.ReservationCheckResultFrame{Type: messages.TypeReservationCheckResult, Conflicts: make([]messages.PathConflict, len(found)),
		ReqID: f.ReqID}
	for i := range found {
		out.Conflicts[i] = messages.PathConflict{Path: found[i].Path, ReservationInfo: reservationInfo(&found[i].Reservation)}
	}
	c.sendFrame(out)
}

// reservationError answers a refused reservation request with its code; a
// store failure is logged and internal.
func (c *conn) reservationError(reqID string, err error) {
	c.sendFrame(c.refusal(reqID, err, "reservations",
		errorCode{broker.ErrInvalidReservationRepo, messages.CodeInvalidReservationRepo},
		errorCode{broker.ErrInvalidPattern, messages.CodeInvalidPattern}, errorCode{broker.ErrInvalidPath, messages.CodeInvalidPath},
		errorCode{broker.ErrTooManyPatterns, messages.CodeTooManyPatterns}, errorCode{broker.ErrTooManyPaths, messages.CodeTooManyPaths},
		errorCode{broker.ErrTooManyReservations, messages.CodeTooManyReservations},
		errorCode{broker.ErrInvalidReservationTTL, messages.CodeInvalidReservationTTL},
		errorCode{broker.ErrInvalidFence, messages.CodeInvalidFence}, errorCode{broker.ErrReservationNotHeld, messages.CodeReservationNotHeld}))
}

func reservationInfos(rs []broker.Reservation) []messages.ReservationInfo {
	out := make([]messages.ReservationInfo, len(rs))
	for i := range rs {
		out[i] = reservationInfo(&rs[i])
	}
	return out
}

func reservationInfo(r *broker.Reservation) messages.ReservationInfo {
	return messages.ReservationInfo{Repo: r.Repo, Pattern: r.Pattern, Exclusive: r.Exclusive, FenceToken: r.Fence, Holder: r.Holder,
		HolderName: r.HolderName, AcquiredAt: isoTime(r.AcquiredAt), ExpiresAt: isoTime(r.ExpiresAt)}
}
