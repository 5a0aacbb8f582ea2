// Package gctune sets a long-running command's garbage collection: the
// daemon's and the broker's (cmd/claudemesh), the MCP server's
// (cmd/internal/mcpserver), each with the percent and limit that suit it.
package gctune

import (
	"os"
	"runtime/debug"
)

// Set sets the collector's percent and soft memory limit (bytes), unless
// GOGC or GOMEMLIMIT says otherwise.
func Set(percent int, limit int64) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
	}
}
