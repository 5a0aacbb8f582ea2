package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Memory (wire protocol §2.2). A connection remembers as the key it sends
// with (a session its session key) and the name it goes by; it recalls
// and forgets any memory of its mesh. Errors carry the request's _reqId in
// both id and _reqId, as the topic requests' do.

// memoryFrames are the memory requests.
var memoryFrames = frames{
	answers((*conn).remember),
	answers((*conn).recall),
	answers((*conn).forget),
}

func (c *conn) remember(f *messages.RememberFrame) {
	m, err := c.store.Remember(context.Background(), c.mesh.ID,
		broker.NewMemory{Content: f.Content, Tags: f.Tags, Pubkey: c.sender, Name: c.displayName()})
	if err != nil {
		c.memoryError(f.ReqID, err)
		return
	}
	c.log.Info("remember", "conn", c.id, "memory", m.ID, "bytes", len(f.Content))
	c.sendFrame(&messages.MemoryStoredFrame{Type: messages.TypeMemoryStored, ID: m.ID, ReqID: f.ReqID})
}

func (c *conn) recall(f *messages.RecallFrame) {
	found, err := c.store.Recall(context.Background(), c.mesh.ID, broker.RecallQuery{Query: f.Query, Tags: f.Tags, Limit: f.Limit})
	if err != nil {
		c.memoryError(f.ReqID, err)
		return
	}
	out := &messages.MemoryResultsFrame{Type: messages.TypeMemoryResults, Memories: make([]messages.MemoryInfo, len(found)),
		ReqID: f.ReqID}
	for i, m := range found {
		out.Memories[i] = messages.MemoryInfo{ID: m.ID, Content: m.Content, Tags: m.Tags, RememberedBy: m.RememberedBy,
			RememberedByName: m.RememberedByName, RememberedAt: isoTime(m.RememberedAt), Score: m.Score}
	}
	c.sendFrame(out)
}

// forget answers upstream's ack whether or not the memory was there.
func (c *conn) forget(f *messages.ForgetFrame) {
	if f.MemoryID == "" {
		c.memoryError(f.ReqID, fmt.Errorf("%w: forget needs memoryId, the id remember answered", broker.ErrInvalid))
		return
	}
	found, err := c.store.Forget(context.Background(), c.mesh.ID, f.MemoryID)
	if err != nil {
		c.memoryError(f.ReqID, err)
		return
	}
	c.log.Info("forget", "conn", c.id, "memory", f.MemoryID, "found", found)
	ack := &messages.AckFrame{Type: messages.TypeAck, ID: f.MemoryID, MessageID: f.MemoryID}
	if f.ReqID != "" {
		ack.ReqID = &f.ReqID
	}
	c.sendFrame(ack)
}

// memoryError answers a failed memory request: invalid_args for a refused
// field, internal (logged) for a store failure.
func (c *conn) memoryError(reqID string, err error) {
	code, msg := codeInternal, "the broker could not read or write its memories; try again"
	switch {
	case errors.Is(err, broker.ErrInvalid):
		code, msg = codeInvalidArgs, err.Error()
	default:
		c.log.Error("memory_request_failed", "conn", c.id, "err", err)
	}
	c.sendFrame(&messages.ErrorFrame{Type: messages.TypeError, Code: code, Message: msg, ID: reqID, ReqID: reqID})
}
