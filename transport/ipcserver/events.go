package ipcserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// SSE constants (spec §3.9, ARCHITECTURE A24).
const (
	// DefaultKeepalive is the interval of the ": keepalive" comment.
	DefaultKeepalive = 15 * time.Second
	// replayPage is how many persisted events one EventsSince asks for.
	replayPage = 500
	// EventsMissed is the event sent when a client resumes after events
	// that were already trimmed from the log.
	EventsMissed = "events_missed"
)

// eventsPath is the one route that does not hold an in-flight slot: its
// streams are bounded by the events actor (messages.MaxStreams).
const eventsPath = "/v1/events"

// events answers GET /v1/events: a server-sent event stream. It subscribes
// first, then (with Last-Event-ID) replays the persisted events after that
// id page by page, then streams live events, skipping any id already sent,
// so a resuming client sees every event once, in order. With ?mesh=<slug>
// the stream carries only that mesh's events (and those of no mesh, such as
// outbox_pressure_high): one agent's view when several share the daemon.
// The stream ends
// when the client goes away or the events actor closes the subscription
// (slow consumer, shutdown); the client then reconnects with Last-Event-ID.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	var after int64
	v := r.Header.Get("Last-Event-ID") // empty: a fresh stream
	resume := v != ""
	if resume {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, invalidQuery("Last-Event-ID must be the id of an event this daemon sent (a non-negative integer)"))
			return
		}
		after = n
	}
	mesh := r.URL.Query().Get("mesh")
	if mesh != "" || sessionOf(r) != nil {
		m, err := s.scope(r, mesh)
		if err != nil {
			writeError(w, err)
			return
		}
		mesh = m.Info.Mesh
	}
	if s.opts.Events == nil {
		writeError(w, &messages.Error{Status: http.StatusServiceUnavailable, Code: "events_unavailable",
			Detail: "the event stream is not running"})
		return
	}
	if s.opts.Pressure != nil && s.opts.Pressure.Level() == persistence.PressureDegraded {
		writeError(w, &messages.Error{Status: http.StatusServiceUnavailable, Code: messages.CodeDegraded,
			Detail: "the daemon is degraded: its disk is full ([outbox] max_size_mb, [disk] reserved_mb); " +
				"streams already open go on, new ones are refused until space returns (GET /v1/inbox reads what arrived)"})
		return
	}
	h := w.Header()
	if r.Method == http.MethodHead {
		h.Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		return
	}
	identity := sessionRoute(r)
	if identity == "" && mesh != "" {
		identity = "mesh:" + mesh
	}
	sub, err := ask[*messages.Subscription](s, s.opts.Events, &messages.Subscribe{Identity: identity, Mesh: mesh})
	if err != nil {
		writeError(w, err)
		return
	}
	defer s.opts.Root.Send(s.opts.Events, &messages.Unsubscribe{ID: sub.ID})

	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sse := &sseWriter{w: w, rc: http.NewResponseController(w), mesh: mesh}
	if sse.flush() != nil {
		return
	}
	last := after
	if resume {
		var ok bool
		if last, ok = s.replay(r, sse, after); !ok {
			return
		}
	}
	keepalive := s.opts.keepalive
	if keepalive <= 0 {
		keepalive = DefaultKeepalive
	}
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.Events.Done(): // dropped as too slow, or the daemon stops
			return
		case <-sub.Events.Ready():
			for ev, ok := sub.Events.Pop(); ok; ev, ok = sub.Events.Pop() {
				if ev.ID <= last {
					continue // already sent by the replay
				}
				if sse.event(ev) != nil {
					return
				}
				last = ev.ID
			}
			if sse.flush() != nil { // one flush per burst
				return
			}
		case <-tick.C:
			if sse.comment("keepalive") != nil {
				return
			}
		}
	}
}

// replay sends the persisted events after after and returns the last id
// sent; ok is false when the stream must end (store or client failure).
func (s *Server) replay(r *http.Request, sse *sseWriter, after int64) (last int64, ok bool) {
	last = after
	for r.Context().Err() == nil {
		page, err := ask[*messages.EventsPage](s, s.opts.Store, &messages.EventsSince{After: last, Limit: replayPage})
		if err != nil {
			s.opts.Log.Warn("events_replay_failed", "after", last, "err", err)
			return last, false
		}
		if page.Gone {
			// The log no longer holds what the client missed: tell it to
			// catch up through the inbox, and go on with live events. The
			// trimmed events are at most persistence.DefaultEventsMaxAge old.
			since := time.Now().Add(-persistence.DefaultEventsMaxAge).UTC().Format(time.RFC3339)
			data, _ := json.Marshal(map[string]any{"last_event_id": after,
				"resume_with": "/v1/inbox?" + url.Values{"since": {since}}.Encode()})
			// Ids already replayed are still skipped; if none were, no live
			// id is (after may be above every id the log issues now: the
			// inbox was recreated).
			if last == after {
				last = 0
			}
			return last, sse.event(messages.Event{Name: EventsMissed, Data: data}) == nil && sse.flush() == nil
		}
		if len(page.Events) == 0 {
			return last, true
		}
		for _, ev := range page.Events {
			if sse.event(ev) != nil {
				return last, false
			}
			last = ev.ID
		}
		if sse.flush() != nil {
			return last, false
		}
	}
	return last, false
}

// sseWriter frames events; the caller flushes (once per burst). With mesh
// set it passes over the events of other meshes.
type sseWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	buf  bytes.Buffer
	mesh string
}

// event writes "id: N\nevent: NAME\ndata: JSON\n\n" (no id line for an
// event that has none, such as events_missed).
func (s *sseWriter) event(ev messages.Event) error {
	if !ev.ForMesh(s.mesh) {
		return nil
	}
	s.buf.Reset()
	if ev.ID > 0 {
		s.buf.WriteString("id: ")
		s.buf.WriteString(strconv.FormatInt(ev.ID, 10))
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString("event: ")
	s.buf.WriteString(ev.Name)
	s.buf.WriteByte('\n')
	// Data is one line of JSON (the store checks it); split defensively so
	// that a newline can never end the frame early.
	for line := range bytes.SplitSeq(bytes.ReplaceAll(ev.Data, []byte("\r"), nil), []byte("\n")) {
		s.buf.WriteString("data: ")
		s.buf.Write(line)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
	_, err := s.w.Write(s.buf.Bytes())
	return err
}

// comment writes ": text\n\n".
func (s *sseWriter) comment(text string) error {
	s.buf.Reset()
	s.buf.WriteString(": ")
	s.buf.WriteString(text)
	s.buf.WriteString("\n\n")
	return s.send()
}

func (s *sseWriter) send() error {
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error { return s.rc.Flush() }

// closeStreams ends every open event stream; it runs when the HTTP server
// shuts down, before the actors stop, so Shutdown does not wait for them.
func (s *Server) closeStreams() {
	if s.opts.Events != nil && s.opts.Root != nil {
		s.opts.Root.Send(s.opts.Events, &messages.CloseStreams{})
	}
}
