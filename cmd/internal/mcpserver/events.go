package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/backoff"
)

// pumpRetry is the pump's reconnect schedule: from 250 ms, doubling, at
// most 5 s; back to the start once a stream was open.
var pumpRetry = backoff.Schedule{First: 250 * time.Millisecond, Max: 5 * time.Second}

const (
	// pumpRecent is how many delivered message ids the pump remembers to
	// tell a catch-up's items from the stream's.
	pumpRecent = 1024
	// catchUpPage is the page size of a catch-up through the inbox.
	catchUpPage = 200
)

// messagePump follows the session's event stream and hands every message
// that arrives to deliver, once. It remembers the last event id and
// resumes after it (Last-Event-ID) when the stream ends — a daemon restart,
// a slow read — so that nothing is lost or shown twice. Before it has seen
// an event it has no id to resume from, so each (re)connect then catches
// up through the inbox: the session's unread messages, those that arrived
// while no server of the session ran included, so that a client that
// reconnects (a new server of the same session) gets what it missed.
type messagePump struct {
	link    *sessionLink
	deliver func(ctx context.Context, it *messages.InboxItem)
	// notice tells the client about a receipt or a contact request.
	notice func(ctx context.Context, name string, data []byte)
	// changed tells the client that the resources of a kind changed.
	changed func(ctx context.Context, kind, thread string)
	log     *slog.Logger

	last   int64    // the last event id seen
	recent []string // the ids delivered last, oldest first
}

// run waits for ready (the client can take notifications), then streams
// until ctx ends.
func (p *messagePump) run(ctx context.Context, ready <-chan struct{}) {
	select {
	case <-ready:
	case <-ctx.Done():
		return
	}
	retry := pumpRetry.Sequence(nil)
	for {
		opened, err := p.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if opened {
			retry.Reset()
		}
		wait := retry.Next()
		p.log.Info("mcp_stream_ended", "err", err, "last_event_id", p.last, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// stream opens the session's event stream (after the last id seen) and
// reads it until it ends; opened reports that the daemon answered.
func (p *messagePump) stream(ctx context.Context) (opened bool, err error) {
	s, err := p.link.get(ctx)
	if err != nil {
		return false, err
	}
	es, err := s.as().Events(ctx, "", p.last)
	if err != nil {
		s.doubt()
		return false, err
	}
	defer es.Close()
	defer s.doubt() // an ended stream may be a daemon restart: check the session before its next use
	if p.last == 0 {
		if err := p.catchUp(ctx, s); err != nil {
			return true, err
		}
	}
	for {
		ev, err := es.Next()
		if err != nil {
			return true, err
		}
		if ev.ID > 0 && ev.ID <= p.last {
			continue
		}
		switch ev.Name {
		case "message":
			var it messages.InboxItem
			if err := json.Unmarshal(ev.Data, &it); err != nil {
				p.log.Warn("mcp_bad_message_event", "event_id", ev.ID, "err", err)
			} else {
				p.hand(ctx, &it)
			}
		case "receipt", "contact_request":
			p.notice(ctx, ev.Name, ev.Data)
		case "peer_join", "peer_leave":
			p.changed(ctx, kindPeers, "")
		case "reservation_lost":
			p.changed(ctx, kindReservations, "")
		case "events_missed":
			if err := p.catchUp(ctx, s); err != nil {
				return true, err
			}
		}
		if ev.ID > 0 {
			p.last = ev.ID
		}
	}
}

// catchUp delivers the session's unread messages that the pump has not
// delivered yet, oldest first.
func (p *messagePump) catchUp(ctx context.Context, s *Session) error {
	q := url.Values{"unread_only": {"true"}, "mark_seen": {"false"}, "limit": {strconv.Itoa(catchUpPage)}}
	for {
		page, err := s.as().Inbox(ctx, q)
		if err != nil {
			return err
		}
		for i := range page.Items {
			p.hand(ctx, &page.Items[i])
		}
		if page.Next == "" || len(page.Items) == 0 {
			return nil
		}
		q.Set("after", page.Next)
	}
}

// hand delivers it unless it was delivered already.
func (p *messagePump) hand(ctx context.Context, it *messages.InboxItem) {
	for _, id := range p.recent {
		if id == it.ID {
			return
		}
	}
	if len(p.recent) == pumpRecent {
		p.recent = p.recent[1:]
	}
	p.recent = append(p.recent, it.ID)
	p.deliver(ctx, it)
}

// shownSet are the ids of the messages a tool's result showed the agent
// last (at most pumpRecent), safe for the tools' and the pump's
// goroutines. A read that shows messages holds reading from before it
// asks the daemon until it has added them, and a push of a message waits
// for it before it looks: a message the read itself pulled from the
// broker reaches the pump while the read is under way.
type shownSet struct {
	reading sync.Mutex
	mu      sync.Mutex
	ids     []string
}

func (s *shownSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == pumpRecent {
		s.ids = s.ids[1:]
	}
	s.ids = append(s.ids, id)
}

func (s *shownSet) has(id string) bool {
	s.reading.Lock()
	//lint:ignore SA2001 an empty critical section: it waits for a read under way
	s.reading.Unlock()
	return s.holds(id)
}

// holds is has without waiting for a read (the read itself asks it).
func (s *shownSet) holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.ids, id)
}

// channelParams are the params of Claude Code's channel notification: the
// text, and string attributes it shows with it.
type channelParams struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// deliver tells the client about an arriving message: a log notification
// (for clients that asked for logs at info or below), and the channel
// notification for a client that takes channels (it declared the
// claude/channel capability, or it is Claude Code, which reads the
// notification when started with channels enabled). A message handed to
// a client that declared the capability counts as read, so that
// check_messages does not return it again — once the notification was
// written: the write of its line to stdout returned (the pipe took it),
// so a client gone before that leaves it unread. Otherwise it stays
// unread.
func (m *mcpServer) deliver(ctx context.Context, it *messages.InboxItem) {
	ss := m.session()
	if ss == nil || m.shown.has(it.ID) {
		return
	}
	if s := m.link.current(); s != nil && it.Kind == "topic" && it.TopicName == "" && messages.IsTopicID(string(it.Topic)) {
		it.TopicName = m.topics.name(ctx, s, string(it.Topic))
	}
	text := formatMessage(it)
	//lint:ignore SA1019 logging notifications stay until every client reads channels; the protocol keeps them through 2027
	if err := ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "claudemesh",
		Data: map[string]any{"text": "claudemesh message. " + text, "message": toInboxMessage(it)}}); err != nil {
		m.log.Warn("mcp_log_notification_failed", "err", err)
	}
	m.changed(ctx, kindMessages, "") // a client subscribed to its inbox or thread reads it there
	if it.ThreadID != "" {
		m.changed(ctx, kindThread, it.ThreadID)
	}
	declared, takes := channelClient(ss.InitializeParams())
	if !takes {
		return
	}
	meta := map[string]string{"from": it.SenderName, "from_pubkey": it.SenderPubkey, "message_id": it.ID,
		"client_message_id": it.ClientMessageID, "kind": it.Kind, "mesh": it.Mesh, "received_at": it.ReceivedAt}
	if it.Topic != "" {
		meta["topic"] = topicLabel(cmp.Or(it.TopicName, string(it.Topic)))
	}
	for k, v := range map[string]string{"reply_to_id": string(it.ReplyToID), "subject": it.Subject, "thread_id": it.ThreadID,
		"importance": it.Importance} {
		if v != "" {
			meta[k] = v
		}
	}
	if it.AckRequired {
		meta["ack_required"] = "true"
	}
	m.upstreamMeta(meta, it) // upstream.go
	if err := m.out.notify(ctx, channelMethod, &channelParams{Content: bodyText(it), Meta: meta}); err != nil {
		m.log.Warn("mcp_channel_notification_failed", "message_id", it.ID, "err", err)
		return // it stays unread: check_messages, and the next server of this session, show it
	}
	if declared {
		// Read once the write to stdout returned, never before: a push lost
		// on the way (the client gone, its pipe closed) leaves it unread.
		// It is pushed from now on: a check_messages the client sends on
		// reading it does not return it again, marked or not yet.
		m.pushed.add(it.ID)
		if s := m.link.current(); s != nil {
			if _, err := s.as().MarkSeen(ctx, []string{it.ID}); err != nil && !errors.Is(err, context.Canceled) {
				m.log.Warn("mcp_mark_seen_failed", "message_id", it.ID, "err", err)
			}
		}
	}
}

// notice tells the client, as deliver does a message, about a receipt for
// one of the session's messages or a contact request its policy holds.
func (m *mcpServer) notice(ctx context.Context, name string, data []byte) {
	ss := m.session()
	if ss == nil {
		return
	}
	text, meta := noticeText(name, data)
	if text == "" {
		return
	}
	//lint:ignore SA1019 logging notifications stay until every client reads channels; the protocol keeps them through 2027
	if err := ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "claudemesh",
		Data: map[string]any{"text": "claudemesh " + name + ". " + text}}); err != nil {
		m.log.Warn("mcp_log_notification_failed", "err", err)
	}
	if _, takes := channelClient(ss.InitializeParams()); takes {
		if err := m.out.notify(ctx, channelMethod, &channelParams{Content: text, Meta: meta}); err != nil {
			m.log.Warn("mcp_channel_notification_failed", "err", err)
		}
	}
}

// noticeText is the sentence and attributes of a receipt or contact
// request event ("" for data that does not read).
func noticeText(name string, data []byte) (string, map[string]string) {
	if name == "contact_request" {
		var ev messages.ContactRequestEvent
		if json.Unmarshal(data, &ev) != nil {
			return "", nil
		}
		return fmt.Sprintf("%s (%.16s…), not one of your contacts, sent you a message: it waits as a contact request until %s "+
				"(list_contacts shows it; answer_contact_request accepts or refuses it).", ev.SenderName, ev.SenderPubkey, ev.Until),
			map[string]string{"kind": name, "from": ev.SenderName, "from_pubkey": ev.SenderPubkey, "message_id": ev.ID}
	}
	var ev messages.ReceiptEvent
	if json.Unmarshal(data, &ev) != nil {
		return "", nil
	}
	what := map[string]string{messages.ReceiptAck: "acknowledged", messages.ReceiptHeld: "holds as a contact request",
		messages.ReceiptRefused: "refused", messages.ReceiptAccepted: "accepted your contact request for"}[ev.Kind]
	text := fmt.Sprintf("%s %s your message %s", ev.PeerName, what, ev.ClientMessageID)
	if ev.Subject != "" {
		text += fmt.Sprintf(" (%q)", ev.Subject)
	}
	if ev.Reason != "" {
		text += ": " + ev.Reason
	}
	return text + ".", map[string]string{"kind": name, "receipt": ev.Kind, "from": ev.PeerName, "from_pubkey": ev.PeerPubkey,
		"client_message_id": ev.ClientMessageID}
}

// channelClient reports whether the client declared the claude/channel
// capability, and whether it takes channel notifications at all.
func channelClient(p *mcp.InitializeParams) (declared, takes bool) {
	if p == nil {
		return false, false
	}
	if p.Capabilities != nil {
		_, declared = p.Capabilities.Experimental[channelCapability]
	}
	return declared, declared || p.ClientInfo != nil && p.ClientInfo.Name == "claude-code"
}
