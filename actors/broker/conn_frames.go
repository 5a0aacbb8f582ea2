package broker

import (
	"fmt"
	"reflect"

	"github.com/asynkron/protoactor-go/actor"
)

// clientFrames is the table of the frames an authenticated connection
// takes, keyed by the pointer type messages.DecodeClientFrame returns.
// Each feature's file declares its own entries; a new frame is one entry
// there (and its type in messages' decoder). conn.frame looks every frame
// after the hello up here; a frame no entry takes (a second hello) is
// answered already_authenticated. TestConnTakesEveryClientFrame fails on a
// frame type the decoder returns that no entry takes.
var clientFrames = frameTable(
	sendFrames,        // send, client_ack (conn_send.go)
	peerFrames,        // list_peers, set_* (conn_peers.go)
	featureFrames,     // feature_negotiation_request (conn_features.go)
	topicFrames,       // conn_topics.go
	stateFrames,       // conn_state.go
	skillFrames,       // conn_skills.go
	memoryFrames,      // conn_memory.go
	lockFrames,        // conn_locks.go
	reservationFrames, // conn_reservations.go
	nodeFrames,        // list_nodes (conn_nodes.go)
	heldFrames,        // drain_held (conn_held.go)
)

// frames are one feature's entries of the table.
type frames []frameEntry

// frameEntry is one entry of the table: the pointer type of the frame it
// takes, and its handler.
type frameEntry struct {
	frame  reflect.Type
	handle frameHandler
}

// frameHandler is a handler with its frame's type erased: frame is a
// pointer of the entry's type.
type frameHandler func(c *conn, ctx actor.Context, frame any)

// answers is the entry of a handler that deals with its frame on its own:
// it reads or writes the store and answers on the connection.
func answers[F any](handle func(c *conn, f *F)) frameEntry {
	return frameEntry{frame: reflect.TypeFor[*F](), handle: func(c *conn, _ actor.Context, frame any) { handle(c, frame.(*F)) }}
}

// acts is the entry of a handler that also tells other actors (the hub,
// a batcher, the connection itself): it is given the actor context.
func acts[F any](handle func(c *conn, ctx actor.Context, f *F)) frameEntry {
	return frameEntry{frame: reflect.TypeFor[*F](), handle: func(c *conn, ctx actor.Context, frame any) { handle(c, ctx, frame.(*F)) }}
}

// frameTable indexes the features' entries by frame type; a frame type
// listed twice is a programming error, refused when the package loads.
func frameTable(features ...frames) map[reflect.Type]frameHandler {
	table := map[reflect.Type]frameHandler{}
	for _, entries := range features {
		for _, e := range entries {
			if table[e.frame] != nil {
				panic(fmt.Sprintf("client frame %v listed twice", e.frame))
			}
			table[e.frame] = e.handle
		}
	}
	return table
}
