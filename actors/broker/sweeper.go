package broker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Sweeper timings.
const (
	// MaxRedeliveryWait bounds the sleep between redelivery sweeps when no
	// lease is pending (a lease taken by another replica is not announced).
	MaxRedeliveryWait = 15 * time.Second
	RetentionInterval = time.Hour
	// MessageRetention is how long message bodies are kept; pruning flips
	// history_available on their dedupe rows.
	MessageRetention = 365 * 24 * time.Hour
	// RevocationCheck is how often the sweeper looks for revoked members
	// to disconnect; revocationOverlap widens each look back, for a
	// revocation committed by another process with a clock a little off.
	RevocationCheck   = 5 * time.Second
	revocationOverlap = time.Minute
	// LockSweep is how often expired locks are cleared; an expired lock
	// is free at once without it.
	LockSweep = time.Minute
)

// sweeper wakes when the next delivery lease expires and asks the hub to
// make the recipients' connections drain (redelivery of unacked pushes on
// a timer, not only on reconnect); every RevocationCheck it has the hub
// disconnect members revoked since; hourly it expires dedupe rows, deletes
// the session rows that stopped counting, prunes old messages and runs
// the orphan check.
type sweeper struct {
	store         *broker.Store
	metrics       *metrics
	hub           *actor.PID
	log           *slog.Logger
	now           func() time.Time
	lastSweep     time.Time
	nextRetention time.Time
	timer         *time.Timer
	wakeAt        time.Time
	// revocations: the interval, the look-back start of the next check and
	// its timer.
	revokeEvery  time.Duration
	revokedSince time.Time
	revokeTimer  *time.Timer
	lockTimer    *time.Timer
}

// lockSweepTick starts a sweep of expired locks.
type lockSweepTick struct{}

// revocationTick starts a look for revoked members.
type revocationTick struct{}

type sweepTick struct{}

// leaseTaken tells the sweeper a delivery lease runs out at `at`, so that it
// wakes then rather than at its next scheduled sweep.
type leaseTaken struct{ at time.Time }

// releaseLeases tells the sweeper that these keys of a mesh hold leases for
// pushes that will not be acked — the connection receiving for them has
// closed, or had closed when a push was fanned out to it: their leases are
// released and the keys' other connections, here or (through NOTIFY) at
// another replica, drain again.
type releaseLeases struct {
	meshID string
	keys   []string
}

func newSweeper(store *broker.Store, m *metrics, hub *actor.PID, log *slog.Logger, now func() time.Time,
	revokeEvery time.Duration) actor.Producer {
	return func() actor.Actor {
		return &sweeper{store: store, metrics: m, hub: hub, log: log.With("actor", "sweeper"), now: now, revokeEvery: revokeEvery}
	}
}

func (s *sweeper) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.lastSweep, s.nextRetention, s.revokedSince = s.now(), s.now(), s.now().Add(-revocationOverlap)
		s.schedule(ctx, 0)
		s.scheduleRevocations(ctx)
		s.lockTimer = workers.SendLater(ctx, LockSweep, &lockSweepTick{})
	case *actor.Stopping:
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.revokeTimer != nil {
			s.revokeTimer.Stop()
		}
		if s.lockTimer != nil {
			s.lockTimer.Stop()
		}
	case *revocationTick:
		s.revocations(ctx)
	case *lockSweepTick:
		s.sweepLocks(ctx)
	case *actor.Stopped, *actor.Restarting:
	case *sweepTick:
		s.tick(ctx)
	case *leaseTaken:
		if m.at.Before(s.wakeAt) {
			s.timer.Stop()
			s.schedule(ctx, max(m.at.Sub(s.now()), 0)+time.Millisecond)
		}
	case *releaseLeases:
		s.release(ctx, m)
	default:
		s.log.Warn("unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

func (s *sweeper) schedule(ctx actor.Context, d time.Duration) {
	s.wakeAt = s.now().Add(d)
	s.timer = workers.SendLater(ctx, d, &sweepTick{})
}

func (s *sweeper) tick(ctx actor.Context) {
	bg := context.Background()
	now := s.now()
	if expired, err := s.store.ExpiredLeases(bg, s.lastSweep, now); err != nil {
		s.log.Error("expired leases", "err", err)
	} else if len(expired) > 0 {
		ctx.Send(s.hub, &hubRedeliver{recipients: expired})
	}
	s.lastSweep = now
	if !now.Before(s.nextRetention) {
		s.retention(bg, now)
		s.nextRetention = now.Add(RetentionInterval)
	}
	wait := MaxRedeliveryWait
	if next, ok, err := s.store.NextLeaseExpiry(bg, now); err == nil && ok && next.Sub(now) < wait {
		wait = max(next.Sub(now), 10*time.Millisecond)
	}
	s.schedule(ctx, wait)
}

// release frees the leases of a closed connection's keys, so what was
// pushed to it and not acked goes out again now rather than when its lease
// runs out (a daemon that crashed or lost its link reconnects within
// seconds; the lease is 30 s).
func (s *sweeper) release(ctx actor.Context, m *releaseLeases) {
	bg := context.Background()
	n, err := s.store.ReleaseRecipientLeases(bg, m.meshID, m.keys)
	if err != nil {
		s.log.Warn("release the leases of a closed connection", "err", err) // they run out instead
		return
	}
	if n == 0 {
		return
	}
	s.metrics.leasesReleased.Add(float64(n))
	if s.store.Backend() == "sqlite" { // on PostgreSQL the release NOTIFYed every replica, this one included
		recipients := make([]broker.Recipient, len(m.keys))
		for i, k := range m.keys {
			recipients[i] = broker.Recipient{MeshID: m.meshID, Pubkey: k}
		}
		ctx.Send(s.hub, &hubRedeliver{recipients: recipients})
	}
}

func (s *sweeper) scheduleRevocations(ctx actor.Context) {
	s.revokeTimer = workers.SendLater(ctx, s.revokeEvery, &revocationTick{})
}

// revocations has the hub disconnect the members revoked since the last
// look (minus the overlap: disconnecting twice changes nothing).
func (s *sweeper) revocations(ctx actor.Context) {
	now := s.now()
	revoked, err := s.store.RevokedSince(context.Background(), s.revokedSince)
	if err != nil {
		s.log.Warn("look for revoked members", "err", err) // the next look covers them
	} else {
		if len(revoked) > 0 {
			ctx.Send(s.hub, &hubRevoked{members: revoked})
		}
		s.revokedSince = now.Add(-revocationOverlap)
	}
	s.scheduleRevocations(ctx)
}

// sweepLocks clears the locks expired by now, and deletes the
// reservations that ran out an hour ago.
func (s *sweeper) sweepLocks(ctx actor.Context) {
	if n, err := s.store.SweepLocks(context.Background(), s.now()); err != nil {
		s.log.Warn("sweep expired locks", "err", err) // the next sweep covers them
	} else if n > 0 {
		s.metrics.locksExpired.Add(float64(n))
	}
	if _, err := s.store.SweepReservations(context.Background(), s.now()); err != nil {
		s.log.Warn("sweep reservations", "err", err)
	}
	s.lockTimer = workers.SendLater(ctx, LockSweep, &lockSweepTick{})
}

func (s *sweeper) retention(ctx context.Context, now time.Time) {
	if n, err := s.store.SweepDedupe(ctx, now); err != nil {
		s.log.Error("dedupe retention", "err", err)
	} else if n > 0 {
		s.metrics.dedupeExpired.Add(float64(n))
		s.log.Info("dedupe_rows_expired", "rows", n)
	}
	if _, err := s.store.SweepSessions(ctx, now); err != nil {
		s.log.Error("sweep sessions", "err", err)
	}
	if n, err := s.store.PruneMessages(ctx, now.Add(-MessageRetention)); err != nil {
		s.log.Error("message retention", "err", err)
	} else if n > 0 {
		s.metrics.messagesPruned.Add(float64(n))
		s.log.Info("messages_pruned", "rows", n)
	}
	orphans, err := s.store.OrphanCheck(ctx)
	if err == nil {
		s.metrics.orphanChecks.Inc()
		s.metrics.orphansFound.Set(float64(orphans.Dedupe))
		s.metrics.atomicityViolation.Set(float64(orphans.History))
	}
	switch {
	case err != nil:
		s.log.Error("orphan check", "err", err)
	case orphans.Dedupe > 0 || orphans.History > 0:
		s.log.Error("orphan_check_failed", "dedupe_orphans", orphans.Dedupe, "history_orphans", orphans.History)
	}
}
