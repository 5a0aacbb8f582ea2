package main

import (
	"os"
	"runtime/debug"
)

// Garbage collection of the long-running processes (daemon, broker).
const (
	// gcPercent lets the heap grow to five times what is live before a
	// collection: the live heap is a few megabytes, and at a sustained
	// rate of sends the collector otherwise took 6–8 % of each process's
	// CPU (docs/BENCHMARKS.md).
	gcPercent = 400
	// gcMemoryLimit is the soft limit that makes the collector work harder
	// as the heap nears it, whatever gcPercent allows.
	gcMemoryLimit = 256 << 20
)

// tuneGC sets gcPercent and gcMemoryLimit unless GOGC or GOMEMLIMIT says
// otherwise.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(gcMemoryLimit)
	}
}
