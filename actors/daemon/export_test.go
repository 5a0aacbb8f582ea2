package daemon

import (
	"context"
	"fmt"

	"github.com/claudemesh/claudemesh-go/messages"
)

// HookPresenceAcross sets the presence of session id as a hook's handler
// does, through the registration the handler found, after reregister has
// run in between: the agent's MCP server registering the same id again.
func (d *Daemon) HookPresenceAcross(ctx context.Context, id string, reregister func()) error {
	found := d.sessions.withID(id)
	if len(found) != 1 {
		return fmt.Errorf("session %s has %d registrations", id, len(found))
	}
	reregister()
	return d.hooks.setPresence(ctx, id, found[0], &messages.SetProfile{Status: ptr(messages.AgentWorking)}, false)
}
