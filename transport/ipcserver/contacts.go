package ipcserver

import (
	"net/http"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Contact policies (messages/contacts.go): each route's own, applied by
// this daemon to the direct messages it receives. A session acts on its
// route; anyone else on the membership named, or the only one.

// contactsList answers GET /v1/contacts?mesh=: the policy and contacts.
func (s *Server) contactsList(w http.ResponseWriter, r *http.Request) {
	mesh, err := s.scope(r, r.URL.Query().Get("mesh"))
	if err != nil {
		writeError(w, err)
		return
	}
	c, err := ask[*messages.Contacts](s, s.opts.Store, &messages.ListContacts{Mesh: mesh.Info.Mesh})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// contactsPolicy answers POST /v1/contacts/policy {policy, request_ttl?}.
func (s *Server) contactsPolicy(w http.ResponseWriter, r *http.Request) {
	var req messages.ContactPolicyRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	cmd := &messages.SetContactPolicy{Policy: req.Policy, TTL: req.TTL(), Now: now()}
	mesh, err := s.scope(r, req.Mesh)
	if err != nil {
		writeError(w, err)
		return
	}
	cmd.Mesh = mesh.Info.Mesh
	c, err := ask[*messages.Contacts](s, s.opts.Store, cmd)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// contactsRequests answers GET /v1/contacts/requests?mesh=: the pending
// contact requests, each with the messages it holds.
func (s *Server) contactsRequests(w http.ResponseWriter, r *http.Request) {
	_, reqs, err := s.pendingRequests(r, r.URL.Query().Get("mesh"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, reqs)
}

// pendingRequests are the pending contact requests of the route a request
// acts on (named, or a session's own).
func (s *Server) pendingRequests(r *http.Request, named string) (*Mesh, *messages.ContactRequests, error) {
	mesh, err := s.scope(r, named)
	if err != nil {
		return nil, nil, err
	}
	reqs, err := ask[*messages.ContactRequests](s, s.opts.Store, &messages.ListContactRequests{Mesh: mesh.Info.Mesh, Now: now()})
	return mesh, reqs, err
}

func (s *Server) contactsAccept(w http.ResponseWriter, r *http.Request) { s.contactsDecide(w, r, true) }
func (s *Server) contactsRefuse(w http.ResponseWriter, r *http.Request) {
	s.contactsDecide(w, r, false)
}

// contactsDecide answers POST /v1/contacts/accept and /refuse {peer}: each
// held message's sender is told first (accepted, or refused), through the
// outbox under an id derived from the message, and then the request is
// decided — so that a decision retried after a failure tells each sender
// once, and a decided request has its notices on the way.
func (s *Server) contactsDecide(w http.ResponseWriter, r *http.Request, accept bool) {
	var req messages.ContactDecisionRequest
	if err := decodeValid(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	mesh, reqs, err := s.pendingRequests(r, req.Mesh)
	if err != nil {
		writeError(w, err)
		return
	}
	pending, err := pickRequest(reqs.Requests, req.Peer)
	if err != nil {
		writeError(w, err)
		return
	}
	notice := messages.Mail{Receipt: messages.ReceiptAccepted, Name: mesh.Name}
	if !accept {
		notice = messages.Mail{Receipt: messages.ReceiptRefused, Reason: messages.ReasonRequestRefused, Name: mesh.Name}
	}
	for _, it := range pending.Messages {
		notice.ReceiptFor = it.ClientMessageID
		send, cid := messages.ReceiptSend(notice, pending.Pubkey, "")
		if _, err := s.acceptReceipt(mesh, send, cid); err != nil {
			writeError(w, err)
			return
		}
	}
	decided, err := ask[*messages.ContactDecision](s, s.opts.Store, &messages.DecideContact{Mesh: mesh.Info.Mesh,
		Peer: pending.Pubkey, Accept: accept, Now: now()})
	if err != nil {
		writeError(w, err)
		return
	}
	out := &messages.ContactDecided{Mesh: mesh.Info.Mesh, Pubkey: pending.Pubkey, Name: pending.Name, Decision: "refused",
		Messages: decided.Messages}
	if accept {
		out.Decision = "accepted"
	}
	writeJSON(w, http.StatusOK, out)
}

// pickRequest finds the pending request peer names: by pubkey, by a
// prefix of at least 8 hex digits, or by display name.
func pickRequest(reqs []messages.ContactRequest, peer string) (*messages.ContactRequest, error) {
	key := strings.ToLower(strings.TrimSpace(peer))
	var matches []*messages.ContactRequest
	for i := range reqs {
		c := &reqs[i]
		switch {
		case c.Pubkey == key:
			return c, nil
		case len(key) >= 8 && messages.IsHex(key) && strings.HasPrefix(c.Pubkey, key),
			messages.NameKey(c.Name) == messages.NameKey(peer):
			matches = append(matches, c)
		}
	}
	switch len(matches) {
	case 0:
		return nil, &messages.Error{Status: http.StatusNotFound, Code: messages.CodeNoContactRequest,
			Detail: "no pending contact request from " + peer + " (GET /v1/contacts/requests lists them)"}
	case 1:
		return matches[0], nil
	}
	return nil, &messages.Error{Status: http.StatusConflict, Code: messages.CodeAmbiguousRequest,
		Detail: peer + " names several pending requests' senders: give the pubkey"}
}
