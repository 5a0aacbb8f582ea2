package actors

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/fifo"
	"github.com/claudemesh/claudemesh-go/transport/ipc/metrics"
)

// StreamBuffer is how many events a stream may fall behind before the
// events actor closes it; the client then resumes with Last-Event-ID.
const StreamBuffer = 8192

// Events is the SSE fan-out (spec §3.9, ARCHITECTURE A24): a registry of at
// most messages.MaxStreams subscribers (messages.MaxStreamsPerIdentity for
// one identity), each with a queue of at most StreamBuffer events that
// grows with what it holds. The store persists and numbers events; whoever
// committed one hands it over with *messages.Publish, and the events actor
// copies it to every stream that carries its mesh without ever blocking
// (reading the mesh from its data once, not once per stream, and waking no
// stream of another mesh: each agent session holds a stream of its own).
// A stream that cannot keep up is closed and removed (its client resumes
// by id from the persisted log), so memory stays bounded whatever the
// clients do.
type Events struct {
	log     *slog.Logger
	metrics *metrics.Daemon
	subs    map[int64]*stream
	per     map[string]int // open streams by identity
	// ofMesh counts the streams of one mesh: an event's mesh is read from
	// its data only while one is open (the unfiltered streams take all).
	ofMesh  int
	nextID  int64
	closing bool
}

// stream is one subscriber.
type stream struct {
	q        *fifo.Queue[messages.Event]
	identity string
	mesh     string // "": every mesh's events
}

// NewEvents returns the events actor's producer.
func NewEvents(m *metrics.Daemon, log *slog.Logger) actor.Producer {
	return func() actor.Actor {
		return &Events{log: log.With("actor", "events"), metrics: m, subs: map[int64]*stream{}, per: map[string]int{}}
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
		ctx.Respond(e.subscribe(msg))
	case *messages.Unsubscribe:
		e.remove(msg.ID)
	case *messages.Publish:
		e.publish(msg.Event)
	case *messages.CloseStreams:
		e.closing = true
		e.closeAll()
	default:
		e.log.Warn("unhandled message", "type", fmt.Sprintf("%T", msg))
	}
}

func (e *Events) subscribe(m *messages.Subscribe) *messages.Subscription {
	identity := m.Identity
	tooMany := func(detail string) *messages.Subscription {
		return &messages.Subscription{Err: &messages.Error{Status: http.StatusTooManyRequests, Code: "too_many_streams", Detail: detail}}
	}
	switch {
	case e.closing:
		return &messages.Subscription{Err: &messages.Error{Status: http.StatusServiceUnavailable, Code: "shutting_down",
			Detail: "the daemon is shutting down"}}
	case len(e.subs) >= messages.MaxStreams:
		return tooMany("at most " + strconv.Itoa(messages.MaxStreams) + " event streams may be open at once")
	case e.per[identity] >= messages.MaxStreamsPerIdentity:
		return tooMany("at most " + strconv.Itoa(messages.MaxStreamsPerIdentity) + " event streams of one identity " +
			"(an agent session, a mesh, or the unfiltered view) may be open at once: close one")
	}
	e.nextID++
	s := &stream{q: fifo.New[messages.Event](StreamBuffer), identity: identity, mesh: m.Mesh}
	if s.mesh != "" {
		e.ofMesh++
	}
	e.subs[e.nextID] = s
	e.per[identity]++
	e.metrics.SSEStreams.Set(float64(len(e.subs)))
	return &messages.Subscription{ID: e.nextID, Events: s.q}
}

// remove ends stream id, if it is open.
func (e *Events) remove(id int64) {
	s, ok := e.subs[id]
	if !ok {
		return
	}
	delete(e.subs, id)
	if s.mesh != "" {
		e.ofMesh--
	}
	if e.per[s.identity]--; e.per[s.identity] == 0 {
		delete(e.per, s.identity)
	}
	s.q.Close()
	e.metrics.SSEStreams.Set(float64(len(e.subs)))
}

func (e *Events) publish(ev messages.Event) {
	if len(e.subs) == 0 {
		return
	}
	if e.ofMesh > 0 && ev.Mesh == "" {
		ev.Mesh = messages.EventMesh(ev.Data)
	}
	for id, s := range e.subs {
		if !ev.ForMesh(s.mesh) {
			continue
		}
		if !s.q.Push(ev) {
			e.remove(id)
			e.metrics.SSEDropped.Inc()
			e.log.Warn("event_stream_dropped_slow_consumer", "stream", id, "event_id", ev.ID, "buffer", StreamBuffer)
		}
	}
}

func (e *Events) closeAll() {
	for id := range e.subs {
		e.remove(id)
	}
}
