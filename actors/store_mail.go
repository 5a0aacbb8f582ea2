package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence"
)

// The store's commands of agent mail: receipts on outbox.db; one row,
// acknowledgements, threads, search and contacts on inbox.db.

func (s *Store) recordReceipt(tx *persistence.Tx, m *messages.RecordReceipt, _ *actor.PID) (*messages.ReceiptRecorded, error) {
	return s.outbox.RecordReceipt(tx, m)
}

func (s *Store) inboxRow(tx *persistence.Tx, m *messages.GetInboxRow, _ *actor.PID) (*messages.InboxRowFound, error) {
	row, err := s.inbox.ReceivedRow(tx, m.ID, m.Mesh)
	return rowFound(row), err
}

func (s *Store) markAcked(tx *persistence.Tx, m *messages.MarkInboxAcked, _ *actor.PID) (*messages.InboxRowFound, error) {
	row, err := s.inbox.MarkAcked(tx, m.ID, m.Now)
	return rowFound(row), err
}

func rowFound(row *persistence.InboxRow) *messages.InboxRowFound {
	if row == nil {
		return &messages.InboxRowFound{}
	}
	it := row.Item()
	return &messages.InboxRowFound{Item: &it}
}

func (s *Store) threadOfInbox(tx *persistence.Tx, m *messages.ThreadOfInbox, _ *actor.PID) (*messages.ThreadFound, error) {
	thread, found, err := s.inbox.ThreadOf(tx, m.Mesh, m.ClientMessageID)
	return &messages.ThreadFound{Thread: thread, Found: found}, err
}

func (s *Store) threadOfOutbox(tx *persistence.Tx, m *messages.ThreadOfOutbox, _ *actor.PID) (*messages.ThreadFound, error) {
	thread, found, err := s.outbox.ThreadOf(tx, m.Mesh, m.ClientMessageID)
	return &messages.ThreadFound{Thread: thread, Found: found}, err
}

func (s *Store) searchInbox(tx *persistence.Tx, m *messages.SearchInbox, _ *actor.PID) (*messages.InboxPage, error) {
	rows, err := s.inbox.Search(tx, m)
	if err != nil {
		return nil, err
	}
	page := &messages.InboxPage{Items: make([]messages.InboxItem, len(rows))}
	for i := range rows {
		page.Items[i] = rows[i].Item()
	}
	return page, nil
}

func (s *Store) setContactPolicy(tx *persistence.Tx, m *messages.SetContactPolicy, _ *actor.PID) (*messages.Contacts, error) {
	if err := s.inbox.SetPolicy(tx, m.Mesh, m.Policy, m.TTL, m.Now); err != nil {
		return nil, err
	}
	return s.inbox.Contacts(tx, m.Mesh)
}

func (s *Store) contactRequests(tx *persistence.Tx, m *messages.ListContactRequests, _ *actor.PID) (*messages.ContactRequests, error) {
	reqs, err := s.inbox.Requests(tx, m.Mesh, m.Peer, m.Now)
	return &messages.ContactRequests{Mesh: m.Mesh, Requests: reqs}, err
}

func (s *Store) noteContact(tx *persistence.Tx, m *messages.NoteContact, _ *actor.PID) (*none, error) {
	return nil, s.inbox.AddContact(tx, m.Mesh, m.Peer, m.Name, "sent", m.Now)
}

// decideContact accepts or refuses a contact request; each message an
// acceptance lets into the inbox gets its "message" event.
func (s *Store) decideContact(tx *persistence.Tx, m *messages.DecideContact, _ *actor.PID) (*messages.ContactDecision, error) {
	rows, err := s.inbox.Decide(tx, m.Mesh, m.Peer, m.Accept, m.Now)
	if err != nil {
		return nil, err
	}
	out := &messages.ContactDecision{Messages: make([]messages.InboxItem, len(rows))}
	for i := range rows {
		out.Messages[i] = rows[i].Item()
		if !m.Accept || rows[i].Body == nil {
			continue
		}
		id, data, err := s.inbox.AppendJSON(tx, "message", &out.Messages[i], m.Now)
		if err != nil {
			return nil, err
		}
		out.Events = append(out.Events, messages.Event{ID: id, Name: "message", Data: data, Mesh: out.Messages[i].Mesh})
	}
	return out, nil
}
