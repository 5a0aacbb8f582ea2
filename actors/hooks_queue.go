package actors

import (
	"fmt"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/hookevent"
)

// hookQueue is one session's rows between the claim and its handler, in
// order, under the spec's backpressure: a critical row is never dropped;
// a bursty row (tool_use, tool_done, unknown types) is coalesced
// latest-wins with the bursty row before it when nothing critical stands
// between them (the current run), and bursty rows are evicted first when
// the queue is full. Every row it drops comes back as an outcome, so that
// it is marked delivered with a note, never left behind.
type hookQueue struct {
	rows []messages.HookRow
}

// push adds r to a queue of at most capacity rows. dropped are the rows
// it let go (r among them, possibly); queued is false when r must wait in
// the outbox instead: the queue is full of critical rows and r is one.
func (q *hookQueue) push(r messages.HookRow, capacity int) (dropped []messages.HookOutcome, queued bool) {
	bursty := !hookevent.Critical(r.EventType)
	if n := len(q.rows); bursty && n > 0 && !hookevent.Critical(q.rows[n-1].EventType) {
		dropped = append(dropped, messages.HookOutcome{ID: q.rows[n-1].ID, Kind: messages.HookCoalesced, EventType: q.rows[n-1].EventType,
			Error: fmt.Sprintf("coalesced: superseded by hook row %d", r.ID)})
		q.rows[n-1] = r
		return dropped, true
	}
	if len(q.rows) < capacity {
		q.rows = append(q.rows, r)
		return nil, true
	}
	note := fmt.Sprintf("evicted: the session's queue was full (%d rows)", capacity)
	for i, old := range q.rows {
		if !hookevent.Critical(old.EventType) {
			q.rows = append(q.rows[:i], q.rows[i+1:]...)
			q.rows = append(q.rows, r)
			return []messages.HookOutcome{{ID: old.ID, Kind: messages.HookEvicted, EventType: old.EventType, Error: note}}, true
		}
	}
	if bursty {
		return []messages.HookOutcome{{ID: r.ID, Kind: messages.HookEvicted, EventType: r.EventType, Error: note}}, true
	}
	return nil, false
}

// pop takes the oldest row.
func (q *hookQueue) pop() (messages.HookRow, bool) {
	if len(q.rows) == 0 {
		return messages.HookRow{}, false
	}
	r := q.rows[0]
	q.rows = q.rows[1:]
	if len(q.rows) == 0 {
		q.rows = nil // let the backing array go
	}
	return r, true
}

// drain empties the queue and returns what it held.
func (q *hookQueue) drain() []messages.HookRow {
	rows := q.rows
	q.rows = nil
	return rows
}

func (q *hookQueue) len() int { return len(q.rows) }

// presenceQueued reports whether a queued row sets the session's presence:
// a session_start, a prompt, or the stop of the session itself (not of a
// subagent).
func (q *hookQueue) presenceQueued() bool {
	for _, r := range q.rows {
		switch r.EventType {
		case hookevent.SessionStart, hookevent.UserPromptSubmit:
			return true
		case hookevent.AgentStop:
			if p, err := hookevent.Decode(r.Payload); err == nil && !p.Subagent {
				return true
			}
		}
	}
	return false
}
