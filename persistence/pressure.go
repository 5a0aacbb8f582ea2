package persistence

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Disk pressure (spec §4.15). Two ratios, in percent, and the higher one
// decides: how much of its cap the outbox (outbox.db and its WAL) uses, and
// how much of the reserve the daemon directory's free space has eaten
// (reserve / free: 100 % when free space equals the reserve).
const (
	PressureHighPct     = 80  // outbox_pressure_high; sends still accepted
	PressureRefusePct   = 95  // POST /v1/send answers 507 insufficient_storage
	PressureDegradedPct = 100 // degraded: new event streams refused too
)

// PressureLevel is where the pressure stands.
type PressureLevel int32

const (
	PressureNormal PressureLevel = iota
	PressureHigh
	PressureRefuse
	PressureDegraded
)

func (l PressureLevel) String() string {
	return [...]string{"normal", "high", "refuse", "degraded"}[l]
}

// DiskLimits are the thresholds ([outbox] max_size_mb, [disk] reserved_mb).
type DiskLimits struct {
	OutboxMaxBytes int64
	ReservedBytes  int64
}

// PressureReading is one measurement.
type PressureReading struct {
	OutboxBytes int64
	FreeBytes   int64
	OutboxPct   float64
	DiskPct     float64
	Level       PressureLevel
}

// Pressure measures the outbox's disk pressure and keeps the last level for
// readers on any goroutine (the IPC server refuses sends from
// PressureRefuse on, and new event streams at PressureDegraded). Measure is called by the store, the one writer.
type Pressure struct {
	dir, outbox string
	level       atomic.Int32
	mu          sync.Mutex
	limits      DiskLimits
	statfs      func(path string) (free int64, err error) // tests fake the filesystem
}

// NewPressure watches the outbox file outboxPath in the directory dir.
func NewPressure(dir, outboxPath string, limits DiskLimits) *Pressure {
	return &Pressure{dir: dir, outbox: outboxPath, limits: limits, statfs: freeBytes}
}

// SetLimits changes the thresholds (SIGHUP); they apply at the next Measure.
func (p *Pressure) SetLimits(l DiskLimits) {
	p.mu.Lock()
	p.limits = l
	p.mu.Unlock()
}

// Level is the level of the last Measure.
func (p *Pressure) Level() PressureLevel { return PressureLevel(p.level.Load()) }

// Measure reads the sizes and the free space, stores the level and returns
// the reading.
func (p *Pressure) Measure() (PressureReading, error) {
	p.mu.Lock()
	limits := p.limits
	p.mu.Unlock()
	var r PressureReading
	var err error
	if r.OutboxBytes, err = FileBytes(p.outbox); err != nil {
		return r, err
	}
	free, err := p.statfs(p.dir)
	if err != nil {
		return r, fmt.Errorf("free space of %s: %w", p.dir, err)
	}
	r.FreeBytes = free
	if limits.OutboxMaxBytes > 0 {
		r.OutboxPct = 100 * float64(r.OutboxBytes) / float64(limits.OutboxMaxBytes)
	}
	switch {
	case limits.ReservedBytes <= 0:
	case free <= 0:
		r.DiskPct = 100
	default:
		r.DiskPct = min(100*float64(limits.ReservedBytes)/float64(free), 100)
	}
	pct := max(r.OutboxPct, r.DiskPct)
	switch {
	case pct >= PressureDegradedPct:
		r.Level = PressureDegraded
	case pct >= PressureRefusePct:
		r.Level = PressureRefuse
	case pct >= PressureHighPct:
		r.Level = PressureHigh
	}
	p.level.Store(int32(r.Level))
	return r, nil
}

func freeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// IsFull reports whether err is SQLite's "database or disk is full".
func IsFull(err error) bool {
	return err != nil && containsAny(err.Error(), "database or disk is full", "SQLITE_FULL")
}

// FileBytes is the size of the SQLite file at path and its WAL; a file
// that does not exist counts for nothing.
func FileBytes(path string) (int64, error) {
	var n int64
	for _, f := range []string{path, path + "-wal"} {
		st, err := os.Stat(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, err
		}
		n += st.Size()
	}
	return n, nil
}
