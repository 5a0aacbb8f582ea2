package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The server's resources: what any client can read (resources/read) and
// subscribe to (resources/subscribe), to be told by
// notifications/resources/updated when one changed — the push of a client
// that takes neither Claude Code's channel notifications nor logs. Each is
// JSON, the structured result of the tool that reads the same thing:
//
//	inbox://messages             the session's unread messages, oldest first (check_messages' result);
//	                             reading it does not mark them read
//	inbox://threads/{thread_id}  a thread: the messages received and sent in it (get_thread's)
//	inbox://peers                the mesh's peers and machines (list_peers')
//	inbox://reservations         the repository's file reservations (list_reservations')
//
// and MCP Agent Mail's names for the first two, resource://inbox/{agent}
// (the session's own inbox, whichever agent it names) and
// resource://thread/{thread_id}. A message updates the inbox and its
// thread; a peer joining or leaving updates the peers; a reservation of
// this session taken, released or lost updates the reservations (other
// agents' are read fresh, but not announced).
const (
	resourceMessages     = "inbox://messages"
	resourceThreads      = "inbox://threads/"
	resourcePeers        = "inbox://peers"
	resourceReservations = "inbox://reservations"
)

// The kinds of resource a URI names (resourceOf).
const (
	kindMessages     = "messages"
	kindThread       = "thread"
	kindPeers        = "peers"
	kindReservations = "reservations"
)

// resourceOf is the kind of resource uri names and, for a thread, its id;
// "" for a URI that is none of ours.
func resourceOf(uri string) (kind, thread string) {
	u, err := url.Parse(uri)
	if err != nil || u.RawQuery != "" && u.Scheme == "inbox" {
		return "", ""
	}
	path := strings.TrimPrefix(u.Path, "/")
	switch {
	case u.Scheme == "inbox" && path == "" && u.Host == "messages":
		return kindMessages, ""
	case u.Scheme == "inbox" && path == "" && u.Host == "peers":
		return kindPeers, ""
	case u.Scheme == "inbox" && path == "" && u.Host == "reservations":
		return kindReservations, ""
	case u.Scheme == "inbox" && u.Host == "threads" && path != "":
		return kindThread, path
	case u.Scheme == "resource" && u.Host == "inbox" && path != "" && !strings.Contains(path, "/"):
		return kindMessages, ""
	case u.Scheme == "resource" && u.Host == "thread" && path != "":
		return kindThread, path
	}
	return "", ""
}

func (m *mcpServer) addResources() {
	for _, r := range []*mcp.Resource{
		{URI: resourceMessages, Name: "inbox", Title: "Your unread messages",
			Description: "The messages peers sent you that you have not read, oldest first (at most 100; more tells of others). " +
				"Reading it does not mark them read: check_messages does. Updated when a message arrives."},
		{URI: resourcePeers, Name: "peers", Title: "Peers on your mesh",
			Description: "The agents on your mesh and the machines they run on, as list_peers shows them. Updated when a peer joins or leaves."},
		{URI: resourceReservations, Name: "reservations", Title: "File reservations in this repository",
			Description: "The repository's file reservations, as list_reservations shows them. Updated when yours change or are lost."},
	} {
		r.MIMEType = "application/json"
		m.srv.AddResource(r, m.readResource)
	}
	for _, t := range []*mcp.ResourceTemplate{
		{URITemplate: resourceThreads + "{thread_id}", Name: "thread", Title: "A thread",
			Description: "A conversation: the messages you received and sent in a thread, as get_thread shows them. Updated when a message of it arrives."},
		{URITemplate: "resource://inbox/{agent}{?project,limit,include_bodies}", Name: "agent-mail-inbox", Title: "Your unread messages (Agent Mail's name)",
			Description: "inbox://messages under MCP Agent Mail's name: the session's own unread messages, whichever agent is named."},
		{URITemplate: "resource://thread/{thread_id}{?project,include_bodies}", Name: "agent-mail-thread", Title: "A thread (Agent Mail's name)",
			Description: "inbox://threads/{thread_id} under MCP Agent Mail's name."},
	} {
		t.MIMEType = "application/json"
		m.srv.AddResourceTemplate(t, m.readResource)
	}
}

// readResource answers resources/read with the structured result of the
// tool that reads the same thing, as JSON.
func (m *mcpServer) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	var out any
	var err error
	switch kind, thread := resourceOf(uri); kind {
	case kindMessages:
		out, err = m.unreadMessages(ctx)
	case kindThread:
		_, out, err = m.getThread(ctx, nil, getThreadIn{ThreadID: thread})
	case kindPeers:
		_, out, err = m.listPeers(ctx, nil, peersIn{})
	case kindReservations:
		_, out, err = m.listReservations(ctx, nil, reservationsIn{})
	default:
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	text, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", uri, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(text)}}}, nil
}

// unreadMessages is the session's unread messages, not marked read.
func (m *mcpServer) unreadMessages(ctx context.Context) (*checkMessagesOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, m.toolError(nil, err)
	}
	page, err := s.as().Inbox(ctx, url.Values{"unread_only": {"true"}, "mark_seen": {"false"}, "limit": {strconv.Itoa(checkMessagesMax)}})
	if err != nil {
		return nil, m.toolError(s, err)
	}
	out := &checkMessagesOut{Messages: make([]inboxMessage, 0, len(page.Items)), More: page.Next != ""}
	for i := range page.Items {
		out.Messages = append(out.Messages, toInboxMessage(&page.Items[i]))
	}
	return out, nil
}

// subscriptions are the resources the client subscribed to, by URI: what
// a change is announced for (the SDK keeps its own list, by session, to
// send the notifications to).
type subscriptions struct {
	mu   sync.Mutex
	uris map[string]bool
}

func (m *mcpServer) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	if kind, _ := resourceOf(req.Params.URI); kind == "" {
		return fmt.Errorf("no resource %.200q to subscribe to: resources/list and resources/templates/list name them", req.Params.URI)
	}
	m.subs.mu.Lock()
	defer m.subs.mu.Unlock()
	if m.subs.uris == nil {
		m.subs.uris = map[string]bool{}
	}
	m.subs.uris[req.Params.URI] = true
	return nil
}

func (m *mcpServer) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	m.subs.mu.Lock()
	defer m.subs.mu.Unlock()
	delete(m.subs.uris, req.Params.URI)
	return nil
}

// changed tells the client that the resources of kind subscribed to
// changed (of a thread: those of that thread).
func (m *mcpServer) changed(ctx context.Context, kind, thread string) {
	m.subs.mu.Lock()
	var uris []string
	for uri := range m.subs.uris {
		if k, t := resourceOf(uri); k == kind && (kind != kindThread || t == thread) {
			uris = append(uris, uri)
		}
	}
	m.subs.mu.Unlock()
	for _, uri := range uris {
		if err := m.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			m.log.Warn("mcp_resource_notification_failed", "uri", uri, "err", err)
		}
	}
}
