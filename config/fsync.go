package config

import (
	"fmt"
	"sync/atomic"
	"time"
)

// FsyncMode is [outbox] fsync_mode: when a send the daemon has answered
// 202 reaches the disk. Every mode survives a crash of the process (a
// commit is in the WAL, in the kernel's page cache, before anyone is
// answered) and none can corrupt the file; they differ only in what a power
// cut or a kernel crash may take back.
type FsyncMode int32

const (
	// FsyncStrict fsyncs the batch before its accepts are answered: a 202
	// survives a power cut. The default.
	FsyncStrict FsyncMode = iota
	// FsyncBatched answers after the commit and fsyncs the WAL within
	// BatchedSyncDelay: a power cut can take back the sends answered in
	// the last 50 ms.
	FsyncBatched
	// FsyncOff answers after the commit and leaves the fsync to SQLite's
	// checkpoints (and to the daemon's stop): a power cut can take back
	// the sends answered since the last checkpoint.
	FsyncOff
)

// BatchedSyncDelay bounds how long a commit waits for its fsync under
// FsyncBatched.
const BatchedSyncDelay = 50 * time.Millisecond

var fsyncModeNames = [...]string{FsyncStrict: "strict", FsyncBatched: "batched_50ms", FsyncOff: "off"}

// String is the mode's name in config.toml.
func (m FsyncMode) String() string {
	if m < 0 || int(m) >= len(fsyncModeNames) {
		return fmt.Sprintf("FsyncMode(%d)", int32(m))
	}
	return fsyncModeNames[m]
}

// ParseFsyncMode reads a config.toml value: strict, batched_50ms or off.
func ParseFsyncMode(s string) (FsyncMode, error) {
	for m, name := range fsyncModeNames {
		if s == name {
			return FsyncMode(m), nil
		}
	}
	return FsyncStrict, fmt.Errorf("%q is not one of strict, batched_50ms, off", s)
}

// FsyncPolicy holds the mode in force; the store reads it for every batch
// and a config reload changes it.
type FsyncPolicy struct{ mode atomic.Int32 }

// NewFsyncPolicy starts with mode.
func NewFsyncPolicy(mode FsyncMode) *FsyncPolicy {
	p := &FsyncPolicy{}
	p.Set(mode)
	return p
}

// Mode is the mode in force; a nil policy is strict.
func (p *FsyncPolicy) Mode() FsyncMode {
	if p == nil {
		return FsyncStrict
	}
	return FsyncMode(p.mode.Load())
}

// Set changes the mode from the next batch on.
func (p *FsyncPolicy) Set(mode FsyncMode) { p.mode.Store(int32(mode)) }
