package main

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/hookoutbox"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// printHookStatus adds the agent-hook outbox to `daemon status`: its
// backlog, the age of its oldest row, its failures and the receivers'
// write errors (nothing for a daemon that keeps no hook outbox).
func printHookStatus(h *messages.HookHealth) {
	if h == nil {
		return
	}
	line := fmt.Sprintf("agent hooks: %d waiting", h.Backlog)
	if h.Backlog > 0 {
		line += fmt.Sprintf(" (oldest %s)", (time.Duration(h.OldestUndeliveredAgeMs) * time.Millisecond).Round(time.Second))
	}
	line += fmt.Sprintf(", %d retrying, %d failed (7 days), %d receiver write errors", h.Retrying, h.Failed, h.ReceiverWriteErrors)
	fmt.Println(line)
	if h.LastError != "" {
		fmt.Printf("  last hook error: %s\n", printable(h.LastError))
	}
	if h.LastReceiverError != "" {
		fmt.Printf("  last receiver error (hooks.errors): %s\n", receiverError(h.LastReceiverError))
	}
	if h.OldestUndeliveredAgeMs > time.Minute.Milliseconds() {
		fmt.Println("  hook events have waited more than a minute: see `claudemesh daemon logs` for hook_retry and hook_failed")
	}
}

// receiverError is the last line of hooks.errors as a person reads it:
// "<time> <agent> <event>: <error>" (the line as it is, printable, if it
// is not one the receiver wrote).
func receiverError(line string) string {
	f, ok := hookoutbox.ParseFailure(line)
	if !ok {
		return printable(line)
	}
	who := strings.TrimSpace(f.Agent + " " + f.Event)
	return printable(fmt.Sprintf("%s %s: %s", stampTime(f.At), cmp.Or(who, "(no agent, no event)"), f.Err))
}

// livePeer is a peer of `claudemesh peers` with the live state its hooks
// report, when it is one of this daemon's agent sessions.
type livePeer struct {
	ipc.MeshPeer
	Live *messages.AgentState `json:"live,omitempty"`
}

func (p livePeer) state() string {
	if p.Live == nil {
		return "-"
	}
	if p.Live.State == messages.AgentNeedsAttention {
		return "needs attention"
	}
	return p.Live.State
}

func (p livePeer) doing() string {
	if p.Live == nil {
		return ""
	}
	return p.Live.Doing
}

// liveStates maps the session keys of this daemon's agent sessions to their
// live state (GET /v1/sessions); a daemon that cannot say gives none.
func liveStates(ctx context.Context, client *ipc.Client) map[string]*messages.AgentState {
	list, err := client.Sessions(ctx)
	if err != nil {
		return nil
	}
	live := map[string]*messages.AgentState{}
	for _, s := range list {
		if s.Live != nil {
			live[s.Presence.SessionPubkey] = s.Live
		}
	}
	return live
}

// withLive pairs each peer with its live state.
func withLive(peers []ipc.MeshPeer, live map[string]*messages.AgentState) []livePeer {
	out := make([]livePeer, len(peers))
	for i, p := range peers {
		out[i] = livePeer{MeshPeer: p, Live: live[p.Pubkey]}
	}
	return out
}
