package mcpserver

import (
	"context"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
)

// What upstream claudemesh's MCP server offered and its agents' prompts
// call, taken as it is: set_summary, list_peers' mesh_slug (onMesh), and
// the channel notification's meta keys (upstreamMeta).

type setSummaryIn struct {
	Summary string `json:"summary" jsonschema:"One or two sentences on what you are working on, shown to peers by list_peers; an empty string clears it."`
}

func (m *mcpServer) addUpstreamTools() {
	addTool(m.tools, &mcp.Tool{Name: "set_summary", Title: "Set your summary",
		Description: "Tell peers in a sentence or two what you are working on (list_peers shows it): set_status's summary alone, " +
			"under upstream claudemesh's name.",
		InputSchema: schemaOf[setSummaryIn](func(p map[string]*jsonschema.Schema) { p["summary"].MaxLength = jsonschema.Ptr(512) }),
	}, m.setSummary)
}

func (m *mcpServer) setSummary(ctx context.Context, req *mcp.CallToolRequest, in setSummaryIn) (*mcp.CallToolResult, *setStatusOut, error) {
	return m.setStatus(ctx, req, setStatusIn{Summary: &in.Summary})
}

// onMesh checks upstream's mesh_slug against the session's mesh: a
// session is on one mesh, the one it names or none.
func onMesh(slug, mesh string) error {
	if slug == "" || slug == mesh {
		return nil
	}
	return fmt.Errorf("you are on mesh %s, not %s: a session is on one mesh; call list_peers without mesh_slug", mesh, clip(slug))
}

// upstreamMeta adds to a message's channel meta the keys upstream
// claudemesh's server sends and its instructions tell the model to read:
// from_id, from_name, mesh_slug (the session's mesh, as list_peers names
// it), priority and sent_at (the last two when the message carries them).
func (m *mcpServer) upstreamMeta(meta map[string]string, it *messages.InboxItem) {
	slug := it.Mesh
	if s := m.link.current(); s != nil {
		reg, _ := s.Info()
		slug = reg.Mesh
	}
	meta["from_id"], meta["from_name"], meta["mesh_slug"] = it.SenderPubkey, it.SenderName, slug
	for k, v := range map[string]string{"priority": it.Priority, "sent_at": it.SentAt} {
		if v != "" {
			meta[k] = v
		}
	}
}
