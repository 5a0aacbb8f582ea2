package ipcserver

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Agent mail on the IPC surface: a reply's thread, acknowledgements (POST
// /v1/inbox/<id>/ack), inbox search, and the contacts a route writes to.

// resolveThread names the thread of a reply sent without one: the thread
// of the message it answers, as this sender's inbox (or outbox) has it, or
// else that message's own id, the root's (messages/mail.go). A reply_to_id
// that is no message's client_message_id but one of this route's inbox
// row ids (what an agent reads first) is taken for that message's
// client_message_id, which is what the recipient knows.
func (s *Server) resolveThread(mesh *Mesh, send *messages.Send) error {
	if send.Mail == nil || send.ReplyToID == "" {
		return nil
	}
	thread, err := s.threadOf(mesh.Info.Mesh, send)
	if err == nil && send.Mail.ThreadID == "" {
		send.Thread = thread
	}
	return err
}

// threadOf is the thread of the message send.ReplyToID names (see
// resolveThread), whose id it may correct.
func (s *Server) threadOf(mesh string, send *messages.Send) (string, error) {
	reply := send.ReplyToID
	for _, q := range []any{&messages.ThreadOfInbox{Mesh: mesh, ClientMessageID: reply},
		&messages.ThreadOfOutbox{Mesh: mesh, ClientMessageID: reply}} {
		found, err := ask[*messages.ThreadFound](s, s.opts.Store, q)
		if err != nil {
			return "", err
		}
		if found.Found {
			return cmp.Or(found.Thread, reply), nil
		}
	}
	row, err := ask[*messages.InboxRowFound](s, s.opts.Store, &messages.GetInboxRow{ID: reply, Mesh: mesh})
	if err != nil {
		return "", err
	}
	if row.Item == nil {
		return reply, nil
	}
	send.ReplyToID, send.Mail.ReplyToID = row.Item.ClientMessageID, row.Item.ClientMessageID
	return cmp.Or(row.Item.ThreadID, row.Item.ClientMessageID), nil
}

// contactsNoted remembers the (route, key) pairs whose "wrote to" contact
// was recorded since the daemon started, so that a stream of DMs to one
// peer costs the store one NoteContact; it forgets all past
// maxContactsNoted pairs (a forgotten pair is recorded again: a no-op).
type contactsNoted struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

const maxContactsNoted = 10_000

// noteContact records, once, that mesh wrote a direct message to send's
// recipient: the recipient becomes its contact (a contacts_only route
// takes the answers to what it wrote).
func (s *Server) noteContact(mesh string, send *messages.Send) {
	if send.Destination.Kind != messages.KindDM {
		return
	}
	peer := send.Destination.TargetSpec
	key := mesh + "\x00" + peer
	s.noted.mu.Lock()
	_, seen := s.noted.seen[key]
	if !seen {
		if s.noted.seen == nil || len(s.noted.seen) >= maxContactsNoted {
			s.noted.seen = map[string]struct{}{}
		}
		s.noted.seen[key] = struct{}{}
	}
	s.noted.mu.Unlock()
	if seen {
		return
	}
	name := peer[:8]
	if send.Destination.Ref != peer { // sent to a peer by name
		name = send.Destination.Ref
	}
	s.opts.Root.Send(s.opts.Store, &messages.NoteContact{Mesh: mesh, Peer: peer, Name: name, Now: now()})
}

// inboxAck answers POST /v1/inbox/<id>/ack: a receipt goes back to the
// message's sender through its route's outbox, under an id derived from
// the message (messages.ReceiptID), and then the row is stamped
// acknowledged. Both steps are idempotent, in this order, so that an
// acknowledgement repeated, or retried after a failure, sends one receipt
// and a row stamped acknowledged always has its receipt on the way.
func (s *Server) inboxAck(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/inbox/"), "/ack")
	found, err := ask[*messages.InboxRowFound](s, s.opts.Store, &messages.GetInboxRow{ID: id, Mesh: sessionRoute(r)})
	if err != nil {
		writeError(w, err)
		return
	}
	it := found.Item
	if err := ackable(id, it); err != nil {
		writeError(w, err)
		return
	}
	mesh := s.served(it.Mesh)
	if mesh == nil {
		writeError(w, &messages.Error{Status: http.StatusConflict, Code: messages.CodeMeshNotAttached,
			Detail: fmt.Sprintf("message %s came on %s, which the daemon no longer serves: nothing can be sent from it", id, it.Mesh)})
		return
	}
	send, cid := messages.ReceiptSend(messages.Mail{Receipt: messages.ReceiptAck, ReceiptFor: it.ClientMessageID, Name: mesh.Name},
		it.SenderPubkey, it.Subject)
	status, err := s.acceptReceipt(mesh, send, cid)
	if err != nil {
		writeError(w, err)
		return
	}
	if it.AckedAt != nil {
		// Acknowledged before: its receipt was accepted then, and this
		// call sent nothing more, however far that receipt has got (the
		// outbox answers a repeat still on its way "inflight").
		status = "duplicate"
	}
	acked, err := ask[*messages.InboxRowFound](s, s.opts.Store, &messages.MarkInboxAcked{ID: id, Now: now()})
	if err != nil {
		writeError(w, err)
		return
	}
	if acked.Item == nil || acked.Item.AckedAt == nil {
		writeError(w, &messages.Error{Status: http.StatusNotFound, Code: messages.CodeInboxRowNotFound,
			Detail: "inbox row " + id + " was deleted meanwhile; its receipt is on its way"})
		return
	}
	writeJSON(w, http.StatusOK, &messages.InboxAcked{ID: id, ClientMessageID: it.ClientMessageID, AckedAt: *acked.Item.AckedAt,
		ReceiptClientMessageID: cid, ReceiptStatus: status})
}

// ackable says why row id (nil: none) cannot be acknowledged.
func ackable(id string, it *messages.InboxItem) error {
	switch {
	case it == nil:
		return &messages.Error{Status: http.StatusNotFound, Code: messages.CodeInboxRowNotFound,
			Detail: "no inbox row " + id + " (the id field of GET /v1/inbox items)"}
	case it.HeldUntil != nil:
		return &messages.Error{Status: http.StatusConflict, Code: messages.CodeMessageHeld,
			Detail: "message " + id + " is held as a contact request: accept it (POST /v1/contacts/accept) first"}
	case len(it.SenderPubkey) != 64 || !messages.IsHex(it.SenderPubkey):
		return &messages.Error{Status: http.StatusConflict, Code: messages.CodeNoSender,
			Detail: "message " + id + " names no sender key a receipt could go to"}
	}
	return nil
}

// acceptReceipt queues a receipt from mesh and returns how the outbox took
// it: queued, inflight or duplicate. Its id is derived from what it says
// (messages.ReceiptID): a row of that id is this receipt queued before,
// even if it differs in a detail (its sender renamed since).
func (s *Server) acceptReceipt(mesh *Mesh, send *messages.Send, cid string) (string, error) {
	cmd, err := prepare(mesh, send, cid)
	if err != nil {
		return "", err
	}
	res, err := ask[*messages.AcceptResult](s, s.opts.Accept, cmd)
	if err != nil {
		return "", err
	}
	switch res.Outcome {
	case messages.AcceptQueued:
		return "queued", nil
	case messages.AcceptInflight:
		return "inflight", nil
	}
	return "duplicate", nil
}

// inboxSearch answers GET /v1/inbox/search?q=&mesh=&limit=: the messages
// whose subject or body match q, best first (persistence.Inbox.Search).
func (s *Server) inboxSearch(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q, err := parseSearch(v)
	if err != nil {
		writeError(w, err)
		return
	}
	if sessionOf(r) != nil || q.Mesh != "" {
		m, err := s.scope(r, q.Mesh)
		if err != nil {
			writeError(w, err)
			return
		}
		q.Mesh = m.Info.Mesh
	}
	page, err := ask[*messages.InboxPage](s, s.opts.Store, q)
	if err != nil {
		writeError(w, err)
		return
	}
	page.Items = nonNil(page.Items)
	s.nameTopics(page.Items)
	writeJSON(w, http.StatusOK, page)
}

func parseSearch(v url.Values) (*messages.SearchInbox, error) {
	q := &messages.SearchInbox{Query: v.Get("q"), Mesh: v.Get("mesh"), Limit: messages.DefaultSearchLimit}
	switch {
	case len(q.Query) > messages.MaxSearchQueryBytes:
		return nil, invalidQuery(fmt.Sprintf("q is %d bytes; the limit is %d", len(q.Query), messages.MaxSearchQueryBytes))
	case len(messages.SearchTerms(q.Query, 1)) == 0:
		return nil, invalidQuery("q must have a word to search for (letters or digits)")
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > messages.MaxSearchLimit {
			return nil, invalidQuery("limit must be an integer from 1 to " + strconv.Itoa(messages.MaxSearchLimit))
		}
		q.Limit = n
	}
	return q, nil
}
