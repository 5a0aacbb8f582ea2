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

// The Agent Mail set's project and agent tools (the session is both), its
// start macro, whois, the commit guard and the contacts.
type (
	amEnsureProjectIn struct {
		HumanKey     string `json:"human_key" jsonschema:"Agent Mail's project key (the repository's absolute path). Here the project is your session's mesh and repository, which exist already."`
		IdentityMode string `json:"identity_mode,omitempty" jsonschema:"Agent Mail's identity mode: taken, not used."`
		amFormat
	}
	amProjectOut struct {
		Slug     string `json:"slug" jsonschema:"Your mesh: the project's slug here."`
		HumanKey string `json:"human_key,omitempty" jsonschema:"The key given."`
		Repo     string `json:"repo,omitempty" jsonschema:"The repository's id (its root commit), when the server runs in one."`
	}
	amRegisterIn struct {
		amProject
		Program           string `json:"program,omitempty" jsonschema:"The agent's program (e.g. claude-code): taken, not used."`
		Model             string `json:"model,omitempty" jsonschema:"The agent's model: taken, not used."`
		Name              string `json:"name,omitempty" jsonschema:"The name Agent Mail would give you. Here your name is your session's display name, set when it started: a different name is not taken (use the one returned)."`
		TaskDescription   string `json:"task_description,omitempty" jsonschema:"What you are working on: peers see it as your summary."`
		AttachmentsPolicy string `json:"attachments_policy,omitempty" jsonschema:"Agent Mail's attachment policy: claudemesh messages carry none; taken, not used."`
		RegistrationToken string `json:"registration_token,omitempty" jsonschema:"Agent Mail's registration token: your session needs none; taken, not used."`
		amFormat
	}
	amAgentOut struct {
		Name            string `json:"name" jsonschema:"Your name: peers send to it."`
		Mesh            string `json:"mesh" jsonschema:"Your mesh."`
		Pubkey          string `json:"pubkey" jsonschema:"Your session's key."`
		TaskDescription string `json:"task_description,omitempty" jsonschema:"Your summary, as peers see it."`
	}
	amStartSessionIn struct {
		HumanKey                  string   `json:"human_key,omitempty" jsonschema:"Agent Mail's project key. Here the project is your session's mesh and repository: taken, not used."`
		Program                   string   `json:"program,omitempty" jsonschema:"The agent's program: taken, not used."`
		Model                     string   `json:"model,omitempty" jsonschema:"The agent's model: taken, not used."`
		TaskDescription           string   `json:"task_description,omitempty" jsonschema:"What you are about to do: peers see it as your summary."`
		FileReservationPaths      []string `json:"file_reservation_paths,omitempty" jsonschema:"Files to reserve, as file_reservation_paths' paths (gitignore-style patterns from the repository's root)."`
		FileReservationReason     string   `json:"file_reservation_reason,omitempty" jsonschema:"Agent Mail's reason for the reservation: not kept."`
		FileReservationTTLSeconds int      `json:"file_reservation_ttl_seconds,omitempty" jsonschema:"How long the reservations outlive this session if it dies, 1-3600 seconds (default 3600); the daemon renews them while it lives."`
		InboxLimit                int      `json:"inbox_limit,omitempty" jsonschema:"At most this many unread messages listed (default 10); none is marked read."`
		amAgent
		amFormat
	}
	amStartSessionOut struct {
		Project          amProjectOut     `json:"project" jsonschema:"Your project: mesh and repository."`
		Agent            amAgentOut       `json:"agent" jsonschema:"You: your name, mesh and key."`
		FileReservations *reserveOut      `json:"file_reservations,omitempty" jsonschema:"The outcome of reserving file_reservation_paths."`
		Inbox            []fetchedMessage `json:"inbox" jsonschema:"Your unread messages, oldest first, none marked read."`
	}
	amWhoisIn struct {
		amProject
		AgentName            string `json:"agent_name" jsonschema:"The agent to look up: its display name as list_peers shows it, or its pubkey (or a prefix of 8+ hex digits)."`
		IncludeRecentCommits bool   `json:"include_recent_commits,omitempty" jsonschema:"Agent Mail's archive commits: claudemesh keeps no archive; taken, not used."`
		CommitLimit          int    `json:"commit_limit,omitempty" jsonschema:"Agent Mail's commit count: taken, not used."`
		RegistrationToken    string `json:"registration_token,omitempty" jsonschema:"Agent Mail's registration token: taken, not used."`
		amFormat
	}
	amGuardIn struct {
		amProject
		CodeRepoPath string `json:"code_repo_path" jsonschema:"A directory of the git repository to guard."`
		amFormat
	}
	amUnguardIn struct {
		CodeRepoPath string `json:"code_repo_path" jsonschema:"A directory of the git repository to remove the guard from."`
		amFormat
	}
	amContactsIn struct {
		amProject
		amAgent
		amFormat
	}
	amContactPolicyIn struct {
		amProject
		amAgent
		Policy string `json:"policy" jsonschema:"open, auto, contacts_only or block_all, as in Agent Mail: who may send you direct messages."`
		amFormat
	}
	amRespondContactIn struct {
		amProject
		ToAgent           string `json:"to_agent,omitempty" jsonschema:"You, who received the request: taken, not used."`
		FromAgent         string `json:"from_agent" jsonschema:"Who asked: its display name or pubkey (list_contacts shows the requests)."`
		Accept            bool   `json:"accept" jsonschema:"true: its held messages land in your inbox and it becomes a contact; false: they are dropped."`
		TTLSeconds        int    `json:"ttl_seconds,omitempty" jsonschema:"Agent Mail's contact expiry: claudemesh contacts do not expire; taken, not used."`
		FromProject       string `json:"from_project,omitempty" jsonschema:"Agent Mail's other project: peers here are on your mesh; taken, not used."`
		RegistrationToken string `json:"registration_token,omitempty" jsonschema:"Agent Mail's registration token: taken, not used."`
		amFormat
	}
)

func (m *mcpServer) addAgentMailSetupTools() {
	addTool(m.tools, &mcp.Tool{Name: "ensure_project", Title: "Your project",
		Description: "Agent Mail's project set-up. Here the project is your session's mesh and git repository, which exist: it " +
			"answers with them and creates nothing.",
		Annotations: readOnly(),
		InputSchema: schemaOf[amEnsureProjectIn](nil),
	}, m.amEnsureProject)
	addTool(m.tools, &mcp.Tool{Name: "register_agent", Title: "Register as an agent",
		Description: "Agent Mail's registration. Here your session is registered already, under the display name it started with: " +
			"it answers with that name (use it; a name asked for is not taken) and makes task_description your summary.",
		Annotations: writes(false, true, false),
		InputSchema: schemaOf[amRegisterIn](func(p map[string]*jsonschema.Schema) {
			p["task_description"].MaxLength = jsonschema.Ptr(512)
		}),
	}, m.amRegister)
	addTool(m.tools, &mcp.Tool{Name: "macro_start_session", Title: "Start a session",
		Description: "Call this first, as in Agent Mail: your name and project, file_reservation_paths reserved (refused as a whole " +
			"when another agent's reservation is in the way, unlike Agent Mail, which grants and reports), and your unread messages " +
			"(none marked read).",
		Annotations: writes(false, false, false),
		InputSchema: schemaOf[amStartSessionIn](func(p map[string]*jsonschema.Schema) {
			reservationPaths(p["file_reservation_paths"], false)
			p["file_reservation_ttl_seconds"].Minimum = jsonschema.Ptr(1.0)
			p["file_reservation_ttl_seconds"].Maximum = jsonschema.Ptr(messages.MaxReservationTTL.Seconds())
			p["inbox_limit"].Minimum, p["inbox_limit"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(fetchInboxMax))
			p["task_description"].MaxLength = jsonschema.Ptr(512)
		}),
	}, m.amStartSession)
	addTool(m.tools, &mcp.Tool{Name: "whois", Title: "Who is an agent",
		Description: "An agent's profile, as Agent Mail's whois: name, key, whether it is online, status, summary, groups, machine " +
			"and directory (no archive commits: claudemesh keeps no archive).",
		InputSchema: schemaOf[amWhoisIn](func(p map[string]*jsonschema.Schema) {
			p["agent_name"].MinLength = jsonschema.Ptr(1)
		}),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in amWhoisIn) (*mcp.CallToolResult, *whoisOut, error) {
		return m.whois(ctx, req, whoisIn{Name: in.AgentName})
	})
	addTool(m.tools, &mcp.Tool{Name: "install_precommit_guard", Title: "Install the commit guard",
		Description: "Install claudemesh's commit guard in a repository: pre-commit and pre-push hooks that refuse a commit " +
			"touching files another agent reserved exclusively (Agent Mail's guard installs a pre-commit hook only). A hook " +
			"already there still runs first.",
		Annotations: writes(false, true, false),
		InputSchema: schemaOf[amGuardIn](func(p map[string]*jsonschema.Schema) { p["code_repo_path"].MinLength = jsonschema.Ptr(1) }),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in amGuardIn) (*mcp.CallToolResult, *guardOut, error) {
		return m.guardResult(m.runGuard(ctx, in.CodeRepoPath, "install", "--offline=allow"))
	})
	addTool(m.tools, &mcp.Tool{Name: "uninstall_precommit_guard", Title: "Remove the commit guard",
		Description: "Remove claudemesh's commit guard from a repository, putting back the hooks it had found.",
		Annotations: writes(true, true, false),
		InputSchema: schemaOf[amUnguardIn](func(p map[string]*jsonschema.Schema) { p["code_repo_path"].MinLength = jsonschema.Ptr(1) }),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in amUnguardIn) (*mcp.CallToolResult, *guardOut, error) {
		return m.guardResult(m.runGuard(ctx, in.CodeRepoPath, "uninstall"))
	})
	m.addAgentMailContactTools()
}

// guardResult is a run of claudemesh guard as a tool's result.
func (m *mcpServer) guardResult(out *guardOut, err error) (*mcp.CallToolResult, *guardOut, error) {
	if err != nil {
		return nil, nil, err
	}
	return textResult(strings.Join(out.Said, "\n")), out, nil
}

func (m *mcpServer) addAgentMailContactTools() {
	addTool(m.tools, &mcp.Tool{Name: "list_contacts", Title: "List contacts and requests",
		Description: "Your contact policy, your contacts and the pending contact requests (a stranger's first messages, held). " +
			"claudemesh contacts do not expire.",
		InputSchema: schemaOf[amContactsIn](nil),
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ amContactsIn) (*mcp.CallToolResult, *contactsOut, error) {
		return m.listContacts(ctx, req, listPeersIn{})
	})
	addTool(m.tools, &mcp.Tool{Name: "set_contact_policy", Title: "Set your contact policy",
		Description: "Choose who may send you direct messages, with Agent Mail's policies: open, auto, contacts_only (a " +
			"stranger's messages wait as a contact request) or block_all.",
		InputSchema: schemaOf[amContactPolicyIn](func(p map[string]*jsonschema.Schema) {
			p["policy"].Enum = []any{messages.PolicyOpen, messages.PolicyAuto, messages.PolicyContactsOnly, messages.PolicyBlockAll}
		}),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in amContactPolicyIn) (*mcp.CallToolResult, *contactPolicyOut, error) {
		return m.setContactPolicy(ctx, req, setContactPolicyIn{Policy: in.Policy})
	})
	addTool(m.tools, &mcp.Tool{Name: "respond_contact", Title: "Accept or refuse a contact request",
		Description: "Accept or refuse a contact request. In claudemesh a request is a stranger's first messages, held by your " +
			"policy (there is no request_contact: sending is asking): accepting delivers them, refusing drops them; the sender is told.",
		Annotations: writes(true, false, true),
		InputSchema: schemaOf[amRespondContactIn](func(p map[string]*jsonschema.Schema) { p["from_agent"].MinLength = jsonschema.Ptr(1) }),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in amRespondContactIn) (*mcp.CallToolResult, *answerContactOut, error) {
		return m.answerContact(ctx, req, answerContactIn{Peer: in.FromAgent, Accept: in.Accept})
	})
}

func (m *mcpServer) amEnsureProject(ctx context.Context, _ *mcp.CallToolRequest, in amEnsureProjectIn) (*mcp.CallToolResult, *amProjectOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, nil, m.toolError(nil, err)
	}
	reg, _ := s.Info()
	out := &amProjectOut{Slug: reg.Mesh, HumanKey: in.HumanKey, Repo: repoOnce()}
	return textResult(fmt.Sprintf("Your project is mesh %s%s.", out.Slug, inRepo(out.Repo))), out, nil
}

// inRepo says which repository, if any.
func inRepo(repo string) string {
	if repo == "" {
		return " (not in a git repository: file reservations need one)"
	}
	return ", repository " + repo
}

func (m *mcpServer) amRegister(ctx context.Context, _ *mcp.CallToolRequest, in amRegisterIn) (*mcp.CallToolResult, *amAgentOut, error) {
	out, err := m.amAgent(ctx, in.TaskDescription)
	if err != nil {
		return nil, nil, err
	}
	text := fmt.Sprintf("You are %s on mesh %s: peers send to that name.", out.Name, out.Mesh)
	if in.Name != "" && in.Name != out.Name {
		text += fmt.Sprintf(" (%s was not taken: your session's name is %s.)", clip(in.Name), out.Name)
	}
	return textResult(text), out, nil
}

// amAgent is the session as Agent Mail's agent, its summary set to task
// when there is one.
func (m *mcpServer) amAgent(ctx context.Context, task string) (*amAgentOut, error) {
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, m.toolError(nil, err)
	}
	if task != "" {
		if _, err := s.as().SetProfile(ctx, &messages.SetProfile{Summary: &task}); err != nil {
			return nil, m.toolError(s, err)
		}
	}
	reg, pubkey := s.Info()
	return &amAgentOut{Name: reg.DisplayName, Mesh: reg.Mesh, Pubkey: pubkey, TaskDescription: task}, nil
}

func (m *mcpServer) amStartSession(ctx context.Context, req *mcp.CallToolRequest, in amStartSessionIn) (*mcp.CallToolResult, *amStartSessionOut, error) {
	agent, err := m.amAgent(ctx, in.TaskDescription)
	if err != nil {
		return nil, nil, err
	}
	out := &amStartSessionOut{Project: amProjectOut{Slug: agent.Mesh, HumanKey: in.HumanKey, Repo: repoOnce()}, Agent: *agent}
	text := []string{fmt.Sprintf("You are %s on mesh %s%s.", agent.Name, agent.Mesh, inRepo(out.Project.Repo))}
	if len(in.FileReservationPaths) > 0 {
		r := &messages.ReserveRequest{Repo: repoOnce(), Patterns: in.FileReservationPaths,
			TTLMs: int64(cmp.Or(in.FileReservationTTLSeconds, amReservationTTL)) * 1000}
		s, err := m.repoSession(ctx, r)
		if err != nil {
			return nil, nil, err
		}
		res, said, err := m.reserve(ctx, s, r, "file_reservation_paths")
		if err != nil {
			return nil, nil, m.lockError(s, err)
		}
		out.FileReservations, text = res, append(text, said)
	}
	said, inbox, err := m.fetchInbox(ctx, req, fetchInboxIn{Limit: cmp.Or(in.InboxLimit, 10)})
	if err != nil {
		return nil, nil, err
	}
	out.Inbox, text = inbox.Messages, append(text, resultText(said))
	return textResult(strings.Join(text, "\n\n")), out, nil
}

// amReservationTTL is Agent Mail's default reservation TTL, an hour: the
// longest claudemesh grants.
const amReservationTTL = 3600
