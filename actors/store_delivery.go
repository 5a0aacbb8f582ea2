package actors

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

func nowMs() int64 { return time.Now().UnixMilli() }

// claimDue expires rows past their max age, claims the due ones and says
// when the next one is due, in one savepoint.
func (s *Store) claimDue(tx *sqlx.Tx, m *messages.ClaimDue) (*messages.ClaimedRows, error) {
	out := &messages.ClaimedRows{}
	var err error
	if m.ExpireBefore > 0 {
		if out.Expired, err = s.outbox.ExpireOld(tx, m.Mesh, m.ExpireBefore, m.Now); err != nil {
			return nil, err
		}
	}
	rows, err := s.outbox.ClaimDue(tx, m.Mesh, m.Now, m.Limit)
	if err != nil {
		return nil, err
	}
	out.Rows = make([]messages.ClaimedRow, len(rows))
	for i, r := range rows {
		out.Rows[i] = messages.ClaimedRow{ID: r.ID, ClientMessageID: r.ClientMessageID, Payload: r.Payload, Attempts: r.Attempts}
	}
	out.NextDue, out.HasNext, err = s.outbox.NextDue(tx, m.Mesh)
	return out, err
}

// sendOutcome applies a broker answer to its row. A row that is no longer
// inflight (requeued, expired) is left alone and reported.
func (s *Store) sendOutcome(tx *sqlx.Tx, m *messages.SendOutcome) (*messages.OutcomeApplied, error) {
	var err error
	switch m.Outcome {
	case messages.OutcomeDone:
		err = s.outbox.MarkDone(tx, m.RowID, m.BrokerMessageID, m.HistoryID, m.Now)
	case messages.OutcomeDead:
		err = s.outbox.MarkDead(tx, m.RowID, m.Reason, m.Now)
	default:
		err = s.outbox.Retry(tx, m.RowID, m.Reason, m.Next)
	}
	if errors.Is(err, persistence.ErrStateChanged) {
		return &messages.OutcomeApplied{StateChanged: true}, nil
	}
	return &messages.OutcomeApplied{}, err
}

// storeInbound inserts a received message; a new row that decrypted also
// gets its "message" event, in the same savepoint.
func (s *Store) storeInbound(tx *sqlx.Tx, m *messages.StoreInbound) (*messages.InboundStored, error) {
	it := m.Item
	row := &persistence.InboxRow{ID: it.ID, ClientMessageID: it.ClientMessageID, BrokerMessageID: optional(it.BrokerMessageID),
		Mesh: it.Mesh, Topic: optional(it.Topic), SenderPubkey: it.SenderPubkey, SenderName: it.SenderName,
		Body: it.Body, ReceivedAt: it.ReceivedAtMs, ReplyToID: optional(it.ReplyToID)}
	if len(it.Meta) > 0 {
		meta := string(it.Meta)
		row.Meta = &meta
	}
	inserted, err := s.inbox.Insert(tx, row)
	if err != nil || !inserted || it.Body == nil {
		return &messages.InboundStored{Inserted: inserted}, err
	}
	data, err := json.Marshal(&it)
	if err != nil {
		return nil, err
	}
	id, err := s.inbox.AppendEvent(tx, "message", data, it.ReceivedAtMs)
	if err != nil {
		return nil, err
	}
	return &messages.InboundStored{Inserted: true, Event: &messages.Event{ID: id, Name: "message", Data: data}}, nil
}

func (s *Store) listInbox(tx *sqlx.Tx, m *messages.ListInbox) (*messages.InboxPage, error) {
	rows, next, err := s.inbox.List(tx, persistence.InboxQuery{Since: m.Since, Topic: m.Topic, From: m.From, Mesh: m.Mesh,
		Limit: m.Limit, After: m.After})
	if errors.Is(err, persistence.ErrBadCursor) {
		return nil, &messages.Error{Status: 400, Code: messages.CodeInvalidQuery, Detail: "after is not a cursor from a previous page"}
	}
	if err != nil {
		return nil, err
	}
	page := &messages.InboxPage{Items: make([]messages.InboxItem, len(rows)), Next: next}
	for i := range rows {
		page.Items[i] = InboxItemOf(&rows[i])
	}
	return page, nil
}

// InboxItemOf renders an inbox row for the API.
func InboxItemOf(r *persistence.InboxRow) messages.InboxItem {
	it := messages.InboxItem{ID: r.ID, ClientMessageID: r.ClientMessageID, BrokerMessageID: deref(r.BrokerMessageID),
		Mesh: r.Mesh, Kind: "dm", Topic: deref(r.Topic), SenderPubkey: r.SenderPubkey, SenderName: r.SenderName,
		Body: r.Body, ReceivedAt: time.UnixMilli(r.ReceivedAt).UTC().Format(time.RFC3339Nano), ReceivedAtMs: r.ReceivedAt,
		ReplyToID: deref(r.ReplyToID)}
	if r.Topic != nil {
		it.Kind = "topic"
	}
	if r.Meta != nil {
		it.Meta = json.RawMessage(*r.Meta)
	}
	return it
}

func (s *Store) eventsSince(tx *sqlx.Tx, m *messages.EventsSince) (*messages.EventsPage, error) {
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

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
