// Package gopool runs functions on goroutines that, once done, wait for
// the next function instead of ending: a new goroutine starts with a small
// stack, and one that runs deep code (SQLite translated to Go, an MCP tool
// call through JSON and HTTP) grows and copies it again each time. The
// daemon's actor mailboxes run on one (workers.Pool), an MCP server's
// direct tool calls on another. It imports nothing of the project, so that
// claudemesh-mcp links no actor system.
package gopool

import "sync/atomic"

// Pool runs each function on a waiting goroutine, or on a new one when
// none waits — never after another function, so one that blocks holds up
// only itself. At most maxIdle goroutines wait at once; one that finds that
// many waiting ends, so that a burst leaves no more behind.
type Pool struct {
	work    chan func()
	waiting atomic.Int32 // goroutines waiting on work, or about to
	maxIdle int32
}

// New returns a pool that keeps at most maxIdle goroutines waiting.
func New(maxIdle int) *Pool {
	return &Pool{work: make(chan func()), maxIdle: int32(maxIdle)}
}

// Go runs fn on a waiting goroutine of the pool, or on a new one.
func (p *Pool) Go(fn func()) {
	select {
	case p.work <- fn:
	default:
		go p.run(fn)
	}
}

func (p *Pool) run(fn func()) {
	for {
		fn()
		if p.waiting.Add(1) > p.maxIdle {
			p.waiting.Add(-1)
			return
		}
		fn = <-p.work
		p.waiting.Add(-1)
	}
}
