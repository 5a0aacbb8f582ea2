package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The contact tools: this session's contact policy, its contacts and the
// contact requests its policy holds.
type (
	setContactPolicyIn struct {
		Policy            string `json:"policy" jsonschema:"open: anyone may message you (the default). auto: anyone, and a stranger's first message makes it a contact. contacts_only: a stranger's messages wait as a contact request you accept or refuse. block_all: nobody may send you direct messages."`
		RequestTTLSeconds int    `json:"request_ttl_seconds,omitempty" jsonschema:"How long a contact request waits under contacts_only before it runs out: its messages are dropped and the sender is told (60 to 7776000; default: as before, else 7 days)."`
	}
	contactPolicyOut struct {
		Policy     string `json:"policy" jsonschema:"Your contact policy."`
		RequestTTL string `json:"request_ttl" jsonschema:"How long a contact request waits."`
	}
	contactsOut struct {
		Policy     string             `json:"policy" jsonschema:"Your contact policy."`
		RequestTTL string             `json:"request_ttl" jsonschema:"How long a contact request waits."`
		Contacts   []contactOut       `json:"contacts" jsonschema:"Your contacts: the peers you wrote to, accepted, or let in under auto."`
		Requests   []contactRequestIn `json:"requests" jsonschema:"The pending contact requests, with the messages they hold."`
	}
	contactOut struct {
		Name   string `json:"name" jsonschema:"Display name."`
		Pubkey string `json:"pubkey" jsonschema:"The contact's pubkey."`
		Via    string `json:"via" jsonschema:"sent, accepted or auto."`
	}
	contactRequestIn struct {
		Name     string         `json:"name" jsonschema:"The stranger's display name."`
		Pubkey   string         `json:"pubkey" jsonschema:"Its key: answer_contact_request takes it as peer."`
		Until    string         `json:"until" jsonschema:"When the request expires (RFC 3339)."`
		Messages []inboxMessage `json:"messages" jsonschema:"What it sent you meanwhile."`
	}
	answerContactIn struct {
		Peer   string `json:"peer" jsonschema:"The request's sender: pubkey, a pubkey prefix of 8+ hex digits, or display name (list_contacts shows them)."`
		Accept bool   `json:"accept" jsonschema:"true: its messages land in your inbox and it becomes a contact; false: they are dropped. The sender is told either way."`
	}
	answerContactOut struct {
		Decision string `json:"decision" jsonschema:"accepted or refused."`
		Pubkey   string `json:"pubkey" jsonschema:"The sender."`
		Messages int    `json:"messages" jsonschema:"How many held messages were delivered (accepted) or dropped."`
	}
)

func (m *mcpServer) addContactTools() {
	addTool(m.tools, &mcp.Tool{Name: "set_contact_policy", Title: "Set your contact policy",
		Description: "Choose who may send you direct messages: open, auto, contacts_only (strangers' messages wait as contact " +
			"requests) or block_all. Topic, group and broadcast messages are not affected. Senders are told when their message is " +
			"held or refused.",
		InputSchema: schemaOf[setContactPolicyIn](func(p map[string]*jsonschema.Schema) {
			p["policy"].Enum = []any{messages.PolicyOpen, messages.PolicyAuto, messages.PolicyContactsOnly, messages.PolicyBlockAll}
			p["request_ttl_seconds"].Minimum = jsonschema.Ptr(messages.MinContactRequestTTL.Seconds())
			p["request_ttl_seconds"].Maximum = jsonschema.Ptr(messages.MaxContactRequestTTL.Seconds())
		}),
	}, m.setContactPolicy)
	addTool(m.tools, &mcp.Tool{Name: "list_contacts", Title: "List contacts and requests",
		Description: "Show your contact policy, your contacts, and the pending contact requests (strangers' held messages) to answer with answer_contact_request.",
		InputSchema: schemaOf[listPeersIn](nil),
	}, m.listContacts)
	addTool(m.tools, &mcp.Tool{Name: "answer_contact_request", Title: "Accept or refuse a contact request",
		Description: "Accept (its held messages land in your inbox, and the sender becomes a contact) or refuse (they are dropped) a stranger's contact request.",
		InputSchema: schemaOf[answerContactIn](func(p map[string]*jsonschema.Schema) { p["peer"].MinLength = jsonschema.Ptr(1) }),
	}, m.answerContact)
}

func (m *mcpServer) setContactPolicy(ctx context.Context, _ *mcp.CallToolRequest, in setContactPolicyIn) (*mcp.CallToolResult, *contactPolicyOut, error) {
	req := &messages.ContactPolicyRequest{Policy: in.Policy}
	if in.RequestTTLSeconds != 0 {
		req.RequestTTL = (time.Duration(in.RequestTTLSeconds) * time.Second).String()
	}
	if err := req.Validate(); err != nil {
		return nil, nil, argumentError(err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := s.as().SetContactPolicy(ctx, req)
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out := &contactPolicyOut{Policy: res.Policy, RequestTTL: res.RequestTTL}
	return textResult(fmt.Sprintf("Your contact policy is %s (contact requests wait %s); list_contacts shows your contacts "+
		"and the pending requests.", res.Policy, res.RequestWait())), out, nil
}

func (m *mcpServer) listContacts(ctx context.Context, _ *mcp.CallToolRequest, _ listPeersIn) (*mcp.CallToolResult, *contactsOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	c, err := s.as().Contacts(ctx, "")
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	reqs, err := s.as().ContactRequests(ctx, "")
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out := &contactsOut{Policy: c.Policy, RequestTTL: c.RequestTTL, Contacts: make([]contactOut, 0, len(c.Contacts)),
		Requests: make([]contactRequestIn, 0, len(reqs.Requests))}
	var b strings.Builder
	fmt.Fprintf(&b, "Contact policy: %s. %s, %s.\n", c.Policy, count(len(c.Contacts), "contact", "contacts"),
		count(len(reqs.Requests), "pending request", "pending requests"))
	names := s.as().PeerNames(ctx, "", len(c.Contacts))
	for _, k := range c.Contacts {
		k.Name = k.DisplayName(names)
		out.Contacts = append(out.Contacts, contactOut{Name: k.Name, Pubkey: k.Pubkey, Via: k.Via})
		fmt.Fprintf(&b, "- contact %s (%.16s…, %s)\n", k.Name, k.Pubkey, k.Via)
	}
	for _, r := range reqs.Requests {
		req := contactRequestIn{Name: r.Name, Pubkey: r.Pubkey, Until: r.Until, Messages: make([]inboxMessage, 0, len(r.Messages))}
		fmt.Fprintf(&b, "\nContact request from %s (%.16s…), until %s:\n", r.Name, r.Pubkey, r.Until)
		for i := range r.Messages {
			req.Messages = append(req.Messages, toInboxMessage(&r.Messages[i]))
			b.WriteString(formatMessage(&r.Messages[i]) + "\n")
		}
		out.Requests = append(out.Requests, req)
	}
	return textResult(b.String()), out, nil
}

func (m *mcpServer) answerContact(ctx context.Context, _ *mcp.CallToolRequest, in answerContactIn) (*mcp.CallToolResult, *answerContactOut, error) {
	req := &messages.ContactDecisionRequest{Peer: in.Peer}
	if err := req.Validate(); err != nil {
		return nil, nil, argumentError(err)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	res, err := s.as().DecideContact(ctx, req, in.Accept)
	if err != nil {
		return nil, nil, m.mailError(s, err)
	}
	out := &answerContactOut{Decision: res.Decision, Pubkey: res.Pubkey, Messages: len(res.Messages)}
	what := "dropped"
	if in.Accept {
		what = "delivered to your inbox (check_messages shows them)"
	}
	return textResult(fmt.Sprintf("%s the contact request of %s: %s %s; the sender is told.", res.Decision,
		res.Name, count(len(res.Messages), "message", "messages"), what)), out, nil
}
