package main

// Garbage collection of the long-running processes.
const (
	// brokerGCPercent lets a broker's heap grow to five times what is live
	// before a collection: a broker is a server whose live heap is a few
	// megabytes, and at sustained rates the collector's share of its CPU
	// went down with it.
	brokerGCPercent = 400
	// daemonGCPercent is Go's default: a daemon sits beside the user's
	// agents, one connection per agent session, and its memory is theirs.
	// 400 kept 45 MB more resident after a burst between 100 sessions for
	// no CPU saved (docs/BENCHMARKS.md, "Agent sessions").
	daemonGCPercent = 100
	// gcMemoryLimit is the soft limit that makes the collector work harder
	// as the heap nears it, whatever the percent allows.
	gcMemoryLimit = 256 << 20
)
