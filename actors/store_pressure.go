package actors

import (
	"encoding/json"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/actors/workers"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// pressureWatch is the store's watch on the disk pressure.
type pressureWatch struct {
	pressure *persistence.Pressure // nil: not watched
	// measured is when the pressure was last measured; rechecking says a
	// timer will measure it again (set while it is not normal).
	measured   time.Time
	rechecking bool
}

// Disk pressure checks (spec §4.15).
const (
	// pressureEvery spaces the measurements after durable batches.
	pressureEvery = 100 * time.Millisecond
	// pressureRecheck spaces them while the pressure is not normal, so that
	// the store notices the space coming back with no writes to prompt it.
	pressureRecheck = time.Second
)

// pressureTick is the store's recheck timer.
type pressureTick struct{}

// measure reads the disk pressure, records it, and on a rise out of normal
// appends an outbox_pressure_high event (entering and leaving degraded are
// logged too); while it is not normal a timer measures again.
func (s *Store) measure(ctx actor.Context) {
	if s.watch.pressure == nil {
		return
	}
	before := s.watch.pressure.Level()
	if s.watch.measured.IsZero() {
		before = persistence.PressureNormal // the store's first look reports what it finds
	}
	r, err := s.watch.pressure.Measure()
	s.watch.measured = time.Now()
	if err != nil {
		s.log.Warn("measure disk pressure", "err", err)
		return
	}
	s.metrics.DiskRatio.WithLabelValues("outbox").Set(r.OutboxPct / 100)
	s.metrics.DiskRatio.WithLabelValues("free").Set(r.DiskPct / 100)
	switch {
	case r.Level > persistence.PressureNormal && before == persistence.PressureNormal:
		s.log.Warn("outbox_pressure_high", "level", r.Level.String(), "outbox_pct", r.OutboxPct, "disk_pct", r.DiskPct,
			"outbox_bytes", r.OutboxBytes, "free_bytes", r.FreeBytes)
		data, _ := json.Marshal(map[string]any{"level": r.Level.String(), "outbox_pct": r.OutboxPct, "disk_pct": r.DiskPct,
			"outbox_bytes": r.OutboxBytes, "free_bytes": r.FreeBytes})
		ctx.Send(ctx.Self(), &messages.AppendEvent{Name: "outbox_pressure_high", Data: data})
	case r.Level == persistence.PressureNormal && before > persistence.PressureNormal:
		s.log.Info("outbox_pressure_normal", "outbox_pct", r.OutboxPct, "disk_pct", r.DiskPct)
	}
	switch degraded := persistence.PressureDegraded; {
	case r.Level == degraded && before != degraded:
		s.log.Error("daemon_degraded", "outbox_pct", r.OutboxPct, "disk_pct", r.DiskPct,
			"refused", "sends (507) and new event streams (503) until space returns")
	case r.Level != degraded && before == degraded:
		s.log.Info("daemon_degraded_cleared", "level", r.Level.String())
	}
	if r.Level > persistence.PressureNormal && !s.watch.rechecking {
		s.watch.rechecking = true
		workers.SendLater(ctx, pressureRecheck, &pressureTick{})
	}
}
