package actors

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
)

// StreamBuffer is how many events a stream may fall behind before the
// events actor closes it; the client then resumes with Last-Event-ID.
const StreamBuffer = 8192

// Events is the SSE fan-out (spec §3.9, ARCHITECTURE A24): a registry of at
// most messages.MaxStreams subscribers, each with a buffered channel. The
// store persists and numbers events; whoever committed one hands it over
// with *messages.Publish, and the events actor copies it to every stream
// without ever blocking. A stream that cannot keep up is closed and removed
// (its client resumes by id from the persisted log), so memory stays
// bounded whatever the clients do.
type Events struct {
	log     *slog.Logger
	metrics *metrics.Daemon
	subs    map[int64]chan messages.Event
	nextID  int64
	closing bool
}

// NewEvents returns the events actor's producer.
func NewEvents(m *metrics.Daemon, log *slog.Logger) actor.Producer {
	return func() actor.Actor {
		return &Events{log: log.With("actor", "events"), metrics: m, subs: make(map[int64]chan messages.Event)}
	}
}

// Receive handles one message.
func (e *Events) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *actor.Stopped:
	case *actor.Stopping, *actor.Restarting:
		// A restarted actor starts with an empty registry: the old
		// channels must end, or their handlers would wait forever.
		e.closeAll()
	case *messages.Subscribe:
		ctx.Respond(e.subscribe())
	case *messages.Unsubscribe:
		if ch, ok := e.subs[msg.ID]; ok {
			delete(e.subs, msg.ID)
			close(ch)
			e.metrics.SSEStreams.Set(float64(len(e.subs)))
		}
	case *messages.Publish:
		e.publish(msg.Event)
	case *messages.CloseStreams:
		e.closing = true
		e.closeAll()
	default:
		e.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

func (e *Events) subscribe() *messages.Subscription {
	if e.closing {
		return &messages.Subscription{Err: &messages.Error{Status: http.StatusServiceUnavailable, Code: "shutting_down",
			Detail: "the daemon is shutting down"}}
	}
	if len(e.subs) >= messages.MaxStreams {
		return &messages.Subscription{Err: &messages.Error{Status: http.StatusTooManyRequests, Code: "too_many_streams",
			Detail: "at most " + strconv.Itoa(messages.MaxStreams) + " event streams may be open at once"}}
	}
	e.nextID++
	ch := make(chan messages.Event, StreamBuffer)
	e.subs[e.nextID] = ch
	e.metrics.SSEStreams.Set(float64(len(e.subs)))
	return &messages.Subscription{ID: e.nextID, Events: ch}
}

func (e *Events) publish(ev messages.Event) {
	for id, ch := range e.subs {
		select {
		case ch <- ev:
		default:
			delete(e.subs, id)
			close(ch)
			e.metrics.SSEDropped.Inc()
			e.metrics.SSEStreams.Set(float64(len(e.subs)))
			e.log.Warn("event_stream_dropped_slow_consumer", "stream", id, "event_id", ev.ID, "buffer", StreamBuffer)
		}
	}
}

func (e *Events) closeAll() {
	for id, ch := range e.subs {
		delete(e.subs, id)
		close(ch)
	}
	e.metrics.SSEStreams.Set(0)
}
