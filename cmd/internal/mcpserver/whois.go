package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// whois (one peer's profile) and health_check (whether the daemon, the
// session and the broker link work), as Agent Mail names them.
type (
	whoisIn struct {
		Name string `json:"name" jsonschema:"The peer: its display name as list_peers shows it, its pubkey, or a unique prefix of it (8+ hex digits)."`
	}
	whoisOut struct {
		Name         string   `json:"name" jsonschema:"Its display name: send_message takes it as to."`
		Pubkey       string   `json:"pubkey" jsonschema:"Its key."`
		MemberPubkey string   `json:"member_pubkey,omitempty" jsonschema:"The key of the member (machine or person) it runs under."`
		Online       bool     `json:"online" jsonschema:"Whether it is connected now (else messages to it wait)."`
		Status       string   `json:"status,omitempty" jsonschema:"idle, working, dnd (do not disturb) or offline."`
		Summary      string   `json:"summary,omitempty" jsonschema:"What it says it is doing."`
		Groups       []string `json:"groups,omitempty" jsonschema:"The @groups it is in, with its role in each."`
		Host         string   `json:"host,omitempty" jsonschema:"The machine it runs on."`
		Cwd          string   `json:"cwd,omitempty" jsonschema:"The directory it works in."`
		PeerType     string   `json:"peer_type,omitempty" jsonschema:"What kind of peer it is (e.g. an agent session)."`
		ConnectedAt  string   `json:"connected_at,omitempty" jsonschema:"Since when it is connected (RFC 3339)."`
		Title        string   `json:"title,omitempty" jsonschema:"Its profile's title."`
		Bio          string   `json:"bio,omitempty" jsonschema:"Its profile's bio."`
		Capabilities []string `json:"capabilities,omitempty" jsonschema:"What its profile says it can do."`
		You          bool     `json:"you" jsonschema:"This is you."`
	}
	healthIn  struct{}
	healthOut struct {
		Status          string   `json:"status" jsonschema:"ok; degraded (it works, with the problems listed); or error (it does not work now: see problems)."`
		Problems        []string `json:"problems" jsonschema:"What is wrong, each with what to do."`
		DaemonVersion   string   `json:"daemon_version,omitempty" jsonschema:"The claudemesh daemon's version."`
		UptimeSeconds   int64    `json:"uptime_seconds,omitempty" jsonschema:"How long the daemon has run."`
		Mesh            string   `json:"mesh,omitempty" jsonschema:"The mesh this session is on."`
		You             string   `json:"you,omitempty" jsonschema:"Your display name."`
		BrokerConnected bool     `json:"broker_connected" jsonschema:"Whether the daemon is connected to the mesh's broker (else sends wait in the outbox)."`
		BrokerLagMs     int64    `json:"broker_lag_ms,omitempty" jsonschema:"The last round trip to the broker, in milliseconds."`
		OutboxQueued    int      `json:"outbox_queued" jsonschema:"Messages of the mesh waiting to go out."`
		OutboxDead      int      `json:"outbox_dead" jsonschema:"Messages of the mesh that could not be delivered."`
		DiskPressure    string   `json:"disk_pressure,omitempty" jsonschema:"normal, high, refuse (sends are refused) or degraded."`
	}
)

func (m *mcpServer) addPeerTools() {
	addTool(m.tools, &mcp.Tool{Name: "whois", Title: "Who is a peer",
		Description: "Show one peer's profile: name, key, whether it is online, its status and summary, groups, machine, directory " +
			"and profile (title, bio, capabilities). list_peers lists them all.",
		InputSchema: schemaOf[whoisIn](func(p map[string]*jsonschema.Schema) {
			p["name"].MinLength, p["name"].MaxLength = jsonschema.Ptr(1), jsonschema.Ptr(messages.MaxPeerNameBytes)
		}),
	}, m.whois)
	addTool(m.tools, &mcp.Tool{Name: "health_check", Title: "Check claudemesh's health",
		Description: "Check that messaging works: the daemon answers, this session is attached, the mesh's broker is connected, " +
			"the outbox drains and the disk has room. Says what is wrong and what to do; it is never an error itself.",
		InputSchema: schemaOf[healthIn](nil),
	}, m.healthCheck)
}

func (m *mcpServer) whois(ctx context.Context, _ *mcp.CallToolRequest, in whoisIn) (*mcp.CallToolResult, *whoisOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	peers, err := m.peers.get(ctx, s, true)
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	reg, me := s.Info()
	list := make([]messages.Peer, len(peers))
	for i := range peers {
		list[i] = peers[i].Peer
	}
	key := strings.ToLower(strings.TrimSpace(in.Name))
	if len(key) != 64 || !messages.IsHex(key) {
		if key, err = messages.ResolvePeer(strings.TrimSpace(in.Name), reg.Mesh, list); err != nil {
			return nil, nil, fmt.Errorf("%v: list_peers shows who is on the mesh", err)
		}
	}
	for i := range list {
		if p := &list[i]; strings.EqualFold(p.Pubkey, key) {
			out := whoisOf(p, strings.EqualFold(p.Pubkey, me))
			return textResult(whoisText(out)), out, nil
		}
	}
	return nil, nil, fmt.Errorf("no peer %s on mesh %s: list_peers shows who is on it", clip(in.Name), reg.Mesh)
}

func whoisOf(p *messages.Peer, you bool) *whoisOut {
	out := &whoisOut{Name: p.DisplayName, Pubkey: strings.ToLower(p.Pubkey), MemberPubkey: strings.ToLower(p.MemberPubkey),
		Online: p.PeerRole != messages.PeerRoleMember, Status: p.Status, Summary: p.Summary, Host: p.Hostname, Cwd: p.Cwd,
		PeerType: p.PeerType, ConnectedAt: p.ConnectedAt, Title: p.Title, Bio: p.Bio, Capabilities: p.Capabilities, You: you}
	for _, g := range p.Groups {
		group := "@" + g.Name
		if g.Role != "" {
			group += " (" + g.Role + ")"
		}
		out.Groups = append(out.Groups, group)
	}
	return out
}

func whoisText(w *whoisOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)", cmp.Or(w.Name, "(unnamed)"), w.Pubkey)
	if w.You {
		b.WriteString(" [you]")
	}
	if w.Online {
		fmt.Fprintf(&b, ", online, %s", cmp.Or(w.Status, "idle"))
	} else {
		b.WriteString(", offline: messages to it wait until it connects")
	}
	for _, f := range []struct{ label, v string }{{"summary", w.Summary}, {"groups", strings.Join(w.Groups, ", ")},
		{"host", w.Host}, {"directory", w.Cwd}, {"kind", w.PeerType}, {"connected at", w.ConnectedAt}, {"title", w.Title},
		{"bio", w.Bio}, {"capabilities", strings.Join(w.Capabilities, ", ")}} {
		if f.v != "" {
			fmt.Fprintf(&b, "\n%s: %s", f.label, f.v)
		}
	}
	return b.String()
}

func (m *mcpServer) healthCheck(ctx context.Context, _ *mcp.CallToolRequest, _ healthIn) (*mcp.CallToolResult, *healthOut, error) {
	out := &healthOut{Status: "ok", Problems: []string{}}
	problem := func(status, what string) {
		if out.Status != "error" {
			out.Status = status
		}
		out.Problems = append(out.Problems, what)
	}
	s, err := m.link.get(ctx)
	if err != nil {
		problem("error", m.toolError(nil, err).Error())
		return textResult(healthText(out)), out, nil
	}
	reg, _ := s.Info()
	out.Mesh, out.You = reg.Mesh, reg.DisplayName
	h, err := s.as().Health(ctx)
	if err != nil {
		problem("error", m.toolError(s, err).Error())
		return textResult(healthText(out)), out, nil
	}
	out.DaemonVersion, out.UptimeSeconds, out.DiskPressure = h.DaemonVersion, h.UptimeS, h.DiskPressure
	switch {
	case h.DiskPressure == "refuse" || h.WALSyncFailed != "":
		problem("error", "the daemon cannot store messages (disk full, or its database failed): ask the user to check `claudemesh daemon status`")
	case h.Degraded || h.DiskPressure == "high":
		problem("degraded", "the daemon's disk is nearly full: ask the user to free space")
	}
	var mh *messages.MeshHealth
	for i := range h.Meshes {
		if h.Meshes[i].Mesh == reg.Mesh {
			mh = &h.Meshes[i]
		}
	}
	if mh == nil {
		problem("error", fmt.Sprintf("the daemon does not serve mesh %s: ask the user to check `claudemesh daemon status`", reg.Mesh))
		return textResult(healthText(out)), out, nil
	}
	out.BrokerConnected, out.BrokerLagMs, out.OutboxQueued, out.OutboxDead = mh.Connected, mh.LagMs, mh.QueueDepth, mh.Dead
	switch {
	case mh.Revoked:
		problem("error", "the mesh's broker refused this machine's key as revoked: ask the user to join the mesh again")
	case !mh.Connected:
		problem("degraded", "the daemon is not connected to the mesh's broker: messages wait in the outbox until it is; the daemon keeps trying")
	}
	if mh.Dead > 0 {
		problem("degraded", fmt.Sprintf("%d %s could not be delivered: ask the user to look at `claudemesh outbox list --status dead`",
			mh.Dead, plural(mh.Dead, "message", "messages")))
	}
	return textResult(healthText(out)), out, nil
}

func healthText(h *healthOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "claudemesh: %s", h.Status)
	if h.DaemonVersion != "" {
		fmt.Fprintf(&b, "; daemon %s, up %ds; you are %s on mesh %s; broker connected %v (lag %d ms); outbox %d queued, %d dead",
			h.DaemonVersion, h.UptimeSeconds, h.You, h.Mesh, h.BrokerConnected, h.BrokerLagMs, h.OutboxQueued, h.OutboxDead)
	}
	for _, p := range h.Problems {
		b.WriteString("\n- " + p)
	}
	return b.String()
}
