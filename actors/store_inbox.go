package actors

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// The store's commands on inbox.db: received messages and the event log.

// storeInbound inserts a received message, a direct one as its route's
// contact policy says (refused, held as a contact request, or let in); a
// new row that decrypted also gets its "message" event — a held one its
// "contact_request" event — in the same savepoint.
func (s *Store) storeInbound(tx *persistence.Tx, m *messages.StoreInbound, _ *actor.PID) (*messages.InboundStored, error) {
	it, row := &m.Item, persistence.InboxRowOf(&m.Item)
	if it.Kind == messages.KindDM {
		refused, err := s.inbox.Admit(tx, row)
		if err != nil || refused {
			return &messages.InboundStored{Refused: refused}, err
		}
	}
	inserted, err := s.inbox.Insert(tx, row)
	if err != nil {
		return nil, err
	}
	out := &messages.InboundStored{Inserted: inserted}
	if row.HeldUntil != nil {
		return s.held(tx, row, out)
	}
	if !inserted || it.Body == nil {
		return out, nil
	}
	id, data, err := s.inbox.AppendJSON(tx, "message", it, it.ReceivedAtMs)
	if err != nil {
		return nil, err
	}
	out.Event = &messages.Event{ID: id, Name: "message", Data: data, Mesh: it.Mesh}
	return out, nil
}

// held completes the answer for a message held as a contact request: when
// it is held until (the stored row's time, for a message pushed again: its
// notice to the sender must say the same), and the event of a new one.
func (s *Store) held(tx *persistence.Tx, row *persistence.InboxRow, out *messages.InboundStored) (*messages.InboundStored, error) {
	if !out.Inserted {
		stored, err := s.inbox.HeldUntil(tx, row)
		out.Held = stored
		return out, err
	}
	out.Held = *row.HeldUntil
	ev := &messages.ContactRequestEvent{Mesh: row.Mesh, ID: row.ID, SenderPubkey: row.SenderPubkey,
		SenderName: row.SenderName, Subject: messages.Deref(row.Subject), Until: isoMs(out.Held)}
	data, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	id, err := s.inbox.AppendEvent(tx, "contact_request", data, row.ReceivedAt)
	if err != nil {
		return nil, err
	}
	out.Event = &messages.Event{ID: id, Name: "contact_request", Data: data, Mesh: row.Mesh}
	return out, nil
}

// isoMs renders Unix ms as the API's RFC 3339.
func isoMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// appendEvent persists an event that is not an inbox row.
func (s *Store) appendEvent(tx *persistence.Tx, m *messages.AppendEvent, _ *actor.PID) (*messages.EventAppended, error) {
	id, err := s.inbox.AppendEvent(tx, m.Name, m.Data, nowMs())
	if err != nil {
		return nil, err
	}
	return &messages.EventAppended{Event: &messages.Event{ID: id, Name: m.Name, Data: m.Data}}, nil
}

func (s *Store) listInbox(tx *persistence.Tx, m *messages.ListInbox, _ *actor.PID) (*messages.InboxPage, error) {
	rows, next, err := s.inbox.List(tx, persistence.InboxQuery{Since: m.Since, Topic: m.Topic, From: m.From, Mesh: m.Mesh,
		Limit: m.Limit, After: m.After, UnreadOnly: m.UnreadOnly, Thread: m.Thread, Importance: m.Importance, Unacked: m.Unacked,
		ID: m.ID})
	if errors.Is(err, persistence.ErrBadCursor) {
		return nil, &messages.Error{Status: 400, Code: messages.CodeInvalidQuery, Detail: "after is not a cursor from a previous page"}
	}
	if err != nil {
		return nil, err
	}
	page := &messages.InboxPage{Items: make([]messages.InboxItem, len(rows)), Next: next}
	var unread []string
	for i := range rows {
		page.Items[i] = rows[i].Item()
		if rows[i].SeenAt == nil {
			unread = append(unread, rows[i].ID)
		}
	}
	if m.MarkSeen {
		if page.MarkedSeen, err = s.inbox.MarkSeen(tx, unread, "", m.Now); err != nil {
			return nil, err
		}
	}
	return page, nil
}

func (s *Store) eventsSince(tx *persistence.Tx, m *messages.EventsSince, _ *actor.PID) (*messages.EventsPage, error) {
	evs, err := s.inbox.EventsAfter(tx, m.After, m.Limit)
	if errors.Is(err, persistence.ErrEventsGone) {
		return &messages.EventsPage{Gone: true}, nil
	}
	if err != nil {
		return nil, err
	}
	page := &messages.EventsPage{Events: make([]messages.Event, len(evs))}
	for i, e := range evs {
		page.Events[i] = messages.Event{ID: e.ID, Name: e.Name, Data: e.Data, Mesh: messages.EventMesh(e.Data)}
	}
	return page, nil
}
