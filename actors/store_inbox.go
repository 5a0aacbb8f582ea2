package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// The store's commands on inbox.db: received messages and the event log.

// storeInbound inserts a received message; a new row that decrypted also
// gets its "message" event, in the same savepoint.
func (s *Store) storeInbound(tx *persistence.Tx, m *messages.StoreInbound, _ *actor.PID) (*messages.InboundStored, error) {
	it := &m.Item
	inserted, err := s.inbox.Insert(tx, persistence.InboxRowOf(it))
	if err != nil || !inserted || it.Body == nil {
		return &messages.InboundStored{Inserted: inserted}, err
	}
	id, data, err := s.inbox.AppendJSON(tx, "message", it, it.ReceivedAtMs)
	if err != nil {
		return nil, err
	}
	return &messages.InboundStored{Inserted: true, Event: &messages.Event{ID: id, Name: "message", Data: data}}, nil
}

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
		Limit: m.Limit, After: m.After, UnreadOnly: m.UnreadOnly})
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
		page.Events[i] = messages.Event{ID: e.ID, Name: e.Name, Data: e.Data}
	}
	return page, nil
}
