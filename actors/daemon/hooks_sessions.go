package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/hookevent"
)

// How the hooks follow an agent session's life beyond its presence: a
// SessionEnd ends the session, and Claude Code's /clear — a new session
// id in the same process, whose MCP server stays registered under the old
// one — goes on as the same session, so that one agent is one peer.

// clearKind is the SessionStart source and the SessionEnd reason of a
// Claude Code /clear.
const clearKind = "clear"

// continued is row as the session it acts on: its own session id, or the
// session that id goes on as (sessions.resolve). The SessionStart of a
// /clear, for an id no session has, makes the id an alias of the session
// its agent process registered (or its MCP server did): that session's
// presence, inbox and holdings carry on, and no second peer appears.
func (h *hooks) continued(row *messages.HookRow, p *hookevent.Payload) *messages.HookRow {
	id := h.d.sessions.resolve(row.SessionID)
	if id == "" && row.EventType == hookevent.SessionStart && p.Kind == clearKind {
		var err error
		if id, err = h.d.sessions.continueAs(row.SessionID, p.PID); err != nil {
			h.d.log.Warn("hook_session_not_continued", "session", row.SessionID, "pid", p.PID, "err", err,
				"next", "the new session id registers as a peer of its own")
		} else if id != "" {
			h.d.log.Info("hook_session_continued", "session", row.SessionID, "as", id, "pid", p.PID)
		}
	}
	if id == "" || id == row.SessionID {
		return row
	}
	r := *row
	r.SessionID = id
	return &r
}

// endSession handles a SessionEnd: the session's registrations are
// dropped, so that its peer goes offline at once rather than when the
// reaper finds its process gone, and its broker connection closes. A
// /clear's SessionEnd ends nothing: the process goes on as the same
// session (continued).
func (h *hooks) endSession(ctx context.Context, row *messages.HookRow, p *hookevent.Payload, state messages.AgentState) error {
	sessions := h.d.sessions.withID(row.SessionID)
	if p.Kind != clearKind {
		for _, s := range sessions {
			var me *messages.Error
			if _, err := h.client.DeregisterSession(ctx, s.Token); err != nil && !(errors.As(err, &me) && me.Status == http.StatusNotFound) {
				return fmt.Errorf("end session %s on %s: %w", row.SessionID, s.Mesh, err)
			}
		}
		if len(sessions) > 0 {
			h.d.log.Info("hook_session_ended", "session", row.SessionID, "reason", p.Kind)
		}
	}
	h.publish(row, p, state, sessions)
	return nil
}
