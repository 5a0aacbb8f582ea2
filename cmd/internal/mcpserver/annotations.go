package mcpserver

import "github.com/modelcontextprotocol/go-sdk/mcp"

// toolAnnotations are the behaviour hints of every tool, by name, which a
// client reads to decide what it may call without asking (toolSet adds
// them; TestToolsAnnotated fails on a tool without an entry). The Agent
// Mail set's tools of the same names take them too; those whose names
// only that set has carry their own (agentmail*.go). Set as the tools
// behave:
//   - read-only: the call changes nothing (check_messages is not: it marks
//     what it returns read);
//   - destructive: it may remove or overwrite what someone else relies on
//     (a memory forgotten, a shared value overwritten, others'
//     reservations forced, a stranger's held messages refused);
//   - idempotent: the same call again has no further effect;
//   - open world: it sends something other agents receive as a message
//     or a receipt; the rest acts on the mesh's own records (topics,
//     state, locks, reservations), a closed domain.
var toolAnnotations = map[string]*mcp.ToolAnnotations{
	"send_message":   writes(false, false, true),
	"check_messages": writes(false, false, false),
	"list_peers":     readOnly(),
	"set_status":     writes(false, true, false),

	"topic_list":    readOnly(),
	"topic_create":  writes(false, true, false),
	"topic_join":    writes(false, true, false),
	"topic_leave":   writes(false, true, false),
	"topic_members": readOnly(),
	"topic_history": readOnly(),

	"state_get":  readOnly(),
	"state_set":  writes(true, false, false),
	"state_list": readOnly(),
	"skill_list": readOnly(),
	"skill_get":  readOnly(),
	"remember":   writes(false, false, false),
	"recall":     readOnly(),
	"forget":     writes(true, true, false),

	"lock_acquire":      writes(false, false, false),
	"lock_release":      writes(false, true, false),
	"lock_list":         readOnly(),
	"reserve_files":     writes(true, false, false),
	"release_files":     writes(false, true, false),
	"list_reservations": readOnly(),
	"start_session":     writes(false, false, false),

	"acknowledge_message":    writes(false, true, true),
	"search_messages":        readOnly(),
	"get_thread":             readOnly(),
	"list_unacknowledged":    readOnly(),
	"list_awaiting_acks":     readOnly(),
	"set_contact_policy":     writes(false, true, false),
	"list_contacts":          readOnly(),
	"answer_contact_request": writes(true, false, true),

	"fetch_inbox":   readOnly(),
	"mark_read":     writes(false, true, false),
	"reply_message": writes(false, false, true),
	"whois":         readOnly(),
	"health_check":  readOnly(),
	"set_summary":   writes(false, true, false),
	"skill_publish": writes(true, false, false), // a name the mesh has: its skill replaced
	"guard_install": writes(false, true, false),
}

// readOnly is the hints of a tool that only reads.
func readOnly() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)}
}

// writes is the hints of a tool that changes something.
func writes(destructive, idempotent, openWorld bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{IdempotentHint: idempotent, DestructiveHint: new(destructive), OpenWorldHint: new(openWorld)}
}
