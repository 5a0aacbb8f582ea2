package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Agent Mail tool set (`claudemesh mcp --tools agent-mail`): MCP
// Agent Mail's tool names and argument shapes, so that agents whose
// prompts were written for it work on claudemesh, each mapped onto
// claudemesh's tool of the same meaning and saying in its description
// where it differs. Agent Mail names a project and an agent in every
// call (project_key, agent_name, sender_name, registration tokens); here
// the session is the agent and its mesh and repository the project, so
// those arguments are taken and not used. Agent Mail's tools with no
// claudemesh meaning (projects' and agents' administration, LLM
// summaries, build slots, products, window identities) are not served;
// docs/AGENTS.md lists each.

// agentMailInstructions tell the agent what the Agent Mail set offers,
// naming every tool it registers (TestInstructionsNameEveryTool).
const agentMailInstructions = `This server is claudemesh serving MCP Agent Mail's tools: it connects this session to a mesh of other agents. ` +
	`Your session is your agent and its mesh and git repository your project: project_key, human_key, agent_name, sender_name ` +
	`and registration_token are taken and not needed. Call macro_start_session first (or ensure_project then register_agent): ` +
	`it gives your name, reserves files and lists your inbox. See who else is here with list_peers and whois. ` +
	`Message peers by name with send_message (to, cc and bcc lists) and reply_message; read with fetch_inbox (it marks nothing), ` +
	`then mark_message_read or acknowledge_message; search_messages searches what you received, fetch_topic reads a topic. ` +
	`Reserve files before editing them with file_reservation_paths: unlike Agent Mail, a reservation in the way refuses the ` +
	`request (all paths or none), and grants are fenced; release_file_reservations and renew_file_reservations end or extend ` +
	`them, install_precommit_guard and uninstall_precommit_guard add or remove the commit guard. Contacts: list_contacts, ` +
	`set_contact_policy, respond_contact. health_check says whether messaging works.`

// The arguments by which Agent Mail names the project, the agent and the
// output format: taken, and not used.
type (
	amProject struct {
		ProjectKey string `json:"project_key,omitempty" jsonschema:"Agent Mail's project (a path or slug). Here your project is your session's mesh and repository: taken, not used."`
	}
	amAgent struct {
		AgentName         string `json:"agent_name,omitempty" jsonschema:"Agent Mail's agent name. Here you are your session (your display name): taken, not used."`
		RegistrationToken string `json:"registration_token,omitempty" jsonschema:"Agent Mail's registration token: your session needs none; taken, not used."`
	}
	amSender struct {
		SenderName  string `json:"sender_name,omitempty" jsonschema:"Agent Mail's sender. Here the sender is your session (your display name): taken, not used."`
		SenderToken string `json:"sender_token,omitempty" jsonschema:"Agent Mail's sender token: your session needs none; taken, not used."`
	}
	amFormat struct {
		Format string `json:"format,omitempty" jsonschema:"Agent Mail's output format (json or toon): the results here are JSON."`
	}
)

func (m *mcpServer) addAgentMailTools() {
	m.addAgentMailSetupTools() // agentmail_setup.go
	m.addAgentMailMailTools()  // agentmail_mail.go
	m.addAgentMailFileTools()  // agentmail_files.go
	addTool(m.tools, &mcp.Tool{Name: "list_peers", Title: "List peers",
		Description: "claudemesh's own (Agent Mail reads resource://agents/{project} instead): the agents on your mesh, their " +
			"names for send_message's to, status and summary, and which one is you.",
		InputSchema: schemaOf[peersIn](nil),
	}, m.listPeers)
	addTool(m.tools, &mcp.Tool{Name: "health_check", Title: "Check claudemesh's health",
		Description: "Agent Mail's readiness probe, answered by claudemesh: whether the daemon answers, this session is attached, " +
			"the mesh's broker is connected and the outbox drains; status ok, degraded or error, with what to do.",
		InputSchema: schemaOf[amFormat](nil),
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ amFormat) (*mcp.CallToolResult, *healthOut, error) {
		return m.healthCheck(ctx, req, healthIn{})
	})
}

// agentMailIDs checks Agent Mail's message ids, which are integers there
// and claudemesh inbox ids (strings) here.
func agentMailIDs(p map[string]*jsonschema.Schema, names ...string) {
	for _, name := range names {
		p[name].Pattern = `^[!-~]{1,128}$`
		p[name].Description += " claudemesh's message ids are strings (as fetch_inbox shows them), where Agent Mail's are integers."
	}
}

// recipientList is Agent Mail's to, cc and bcc together, as send_message's
// list: each gets a message of its own.
func recipientList(lists ...[]string) recipients {
	r := recipients{list: true}
	for _, l := range lists {
		for _, name := range l {
			if name = strings.TrimSpace(name); name != "" {
				r.names = append(r.names, name)
			}
		}
	}
	return r
}

// noAttachments refuses Agent Mail's attachments, which claudemesh
// messages do not carry.
func noAttachments(paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	return fmt.Errorf("claudemesh messages carry no attachments; nothing was sent: put the text in body_md, or name the files " +
		"(peers on the same repository read them there)")
}
