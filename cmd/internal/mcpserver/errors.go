package mcpserver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// toolError turns a failure of a daemon request into the tool error the
// agent reads: what happened and what to do, in a sentence, never the raw
// answer. s, when known, is put in doubt when the daemon did not answer,
// so that the next call checks the session first.
func (m *mcpServer) toolError(s *Session, err error) error {
	var me *messages.Error
	var ce *ipc.SendConflictError
	switch {
	case errors.Is(err, ipc.ErrDaemonNotRunning):
		if s != nil {
			s.doubt()
		}
		return errors.New("the claudemesh daemon is not running; start it with `claudemesh daemon up` (or ask the user to), then call the tool again")
	case errors.Is(err, ipc.ErrNoAnswer):
		if s != nil {
			s.doubt()
		}
		return errors.New("the claudemesh daemon is running but did not answer in time (busy, or stopped); call the tool again " +
			"in a moment, and if it keeps failing ask the user to check `claudemesh daemon status`")
	case errors.As(err, &ce):
		return fmt.Errorf("client_message_id %s was already used for a different message; nothing was sent: retry with a new client_message_id (or none)", ce.ClientMessageID)
	case errors.As(err, &me):
		return daemonRefusal(s, me)
	case transient(err):
		if s != nil {
			s.doubt()
		}
		m.log.Warn("mcp_daemon_request_failed", "err", err)
		return errors.New("the connection to the claudemesh daemon failed mid-request; call the tool again (a send with the same client_message_id is never delivered twice)")
	}
	m.log.Warn("mcp_tool_failed", "err", err)
	return fmt.Errorf("%v", err)
}

// daemonRefusal is the sentence for an error answer of the daemon.
func daemonRefusal(s *Session, me *messages.Error) error {
	switch {
	case me.Code == messages.CodeSessionUnknown || me.Code == messages.CodeSessionNotConnected:
		if s != nil {
			s.doubt()
		}
		return errors.New("this session is not (yet) attached at the claudemesh daemon; call the tool again in a moment")
	case me.Code == messages.CodeMessageTooLarge:
		return errors.New("the message is over 32 KiB; nothing was sent: shorten it or split it into several messages")
	case me.Code == "mesh_not_attached":
		return fmt.Errorf("the daemon does not serve this session's mesh (%s); ask the user to check `claudemesh daemon status`", agentDetail(s, me.Detail))
	case me.Code == "broker_unavailable" || me.Code == "broker_unreachable":
		return errors.New("the mesh's broker cannot be reached right now; the daemon keeps trying: call the tool again in a little while")
	case me.Code == messages.CodeTopicNotFound:
		return errors.New("your mesh has no such topic; nothing was sent: call topic_list to see the topics, or topic_create to make it")
	case me.Status == http.StatusNotFound:
		return fmt.Errorf("not found (%s): call list_peers to see who is online", agentDetail(s, me.Detail))
	case me.Status == http.StatusTooManyRequests:
		return errors.New("the claudemesh daemon is busy; call the tool again in a moment")
	case me.Status == http.StatusInsufficientStorage:
		return errors.New("the claudemesh daemon's disk is full, so nothing was stored or sent; ask the user to free disk space")
	case me.Status == http.StatusBadRequest || me.Status == http.StatusRequestEntityTooLarge:
		return argumentError(me)
	case me.Status == http.StatusServiceUnavailable:
		return fmt.Errorf("the claudemesh daemon cannot do this right now (%s); call the tool again in a little while", agentDetail(s, me.Detail))
	}
	return fmt.Errorf("the claudemesh daemon refused the request (%s: %s)", me.Code, agentDetail(s, me.Detail))
}

// agentDetail is a daemon error's detail as the agent reads it: the
// session's route (mesh/session id, the daemon's own name for the
// session) said as its mesh, advice naming claudemesh commands left out
// (the sentence around it names the tool to call), clipped to echoLimit.
func agentDetail(s *Session, detail string) string {
	if s != nil {
		reg, _ := s.Info()
		detail = strings.ReplaceAll(detail, reg.Mesh+"/"+reg.SessionID, reg.Mesh)
	}
	if i := strings.Index(detail, "`claudemesh "); i >= 0 {
		if cut := max(strings.LastIndex(detail[:i], ": "), strings.LastIndex(detail[:i], "; "), strings.LastIndex(detail[:i], ", ")); cut > 0 {
			detail = detail[:cut]
		}
	}
	return clip(detail)
}

// argumentError is a bad argument: nothing was sent.
func argumentError(err error) error {
	var me *messages.Error
	if errors.As(err, &me) {
		if me.Code == messages.CodeMessageTooLarge {
			return errors.New("the message is over 32 KiB; nothing was sent: shorten it or split it into several messages")
		}
		return fmt.Errorf("invalid argument: %s; nothing was sent: fix it and call again", agentDetail(nil, me.Detail))
	}
	return fmt.Errorf("invalid argument: %s; nothing was sent: fix it and call again", clip(err.Error()))
}
