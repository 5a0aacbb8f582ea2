package persistence

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPressure: the higher of the two ratios decides the level; the
// thresholds are 80 and 95 %; new limits apply at the next measurement.
func TestPressure(t *testing.T) {
	dir := t.TempDir()
	outbox := filepath.Join(dir, "outbox.db")
	if err := os.WriteFile(outbox, make([]byte, 600), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outbox+"-wal", make([]byte, 400), 0o600); err != nil {
		t.Fatal(err)
	}
	free := int64(10_000)
	p := NewPressure(dir, outbox, DiskLimits{OutboxMaxBytes: 10_000, ReservedBytes: 1_000})
	p.statfs = func(string) (int64, error) { return free, nil }
	for _, c := range []struct {
		limits DiskLimits
		free   int64
		level  PressureLevel
	}{
		{DiskLimits{OutboxMaxBytes: 10_000, ReservedBytes: 1_000}, 10_000, PressureNormal},  // 10 % and 10 %
		{DiskLimits{OutboxMaxBytes: 1_250, ReservedBytes: 1_000}, 10_000, PressureHigh},     // outbox at 80 %
		{DiskLimits{OutboxMaxBytes: 10_000, ReservedBytes: 1_000}, 1_200, PressureHigh},     // reserve at 83 % of free
		{DiskLimits{OutboxMaxBytes: 10_000, ReservedBytes: 1_000}, 1_050, PressureRefuse},   // reserve at 95 % of free
		{DiskLimits{OutboxMaxBytes: 1_040, ReservedBytes: 0}, 0, PressureRefuse},            // outbox at 96 %; no reserve
		{DiskLimits{OutboxMaxBytes: 10_000, ReservedBytes: 1_000}, 1_000, PressureDegraded}, // free down to the reserve
		{DiskLimits{OutboxMaxBytes: 1_000, ReservedBytes: 0}, 0, PressureDegraded},          // outbox at its cap; no reserve
		{DiskLimits{OutboxMaxBytes: 1 << 30, ReservedBytes: 0}, 0, PressureNormal},          // no reserve: free space not counted
	} {
		p.SetLimits(c.limits)
		free = c.free
		r, err := p.Measure()
		if err != nil {
			t.Fatal(err)
		}
		if r.OutboxBytes != 1_000 || r.FreeBytes != c.free || r.Level != c.level || p.Level() != c.level {
			t.Errorf("limits %+v, free %d: %+v (Level() %v), want level %v", c.limits, c.free, r, p.Level(), c.level)
		}
	}
	p.statfs = func(string) (int64, error) { return 0, errors.New("no statfs") }
	if _, err := p.Measure(); err == nil {
		t.Error("a failed statfs measured")
	}
	if !IsFull(errors.New("database or disk is full (13)")) || IsFull(errors.New("constraint failed")) || IsFull(nil) {
		t.Error("IsFull")
	}
}
