// Package hookevent turns what an agent's hook hands the `claudemesh hook`
// receiver into a row of the hook outbox (spec/hook-outbox.md): the
// agent's event name mapped to an internal event type, the agent's JSON
// normalised into a small payload of our own, and the allowlist applied.
//
// It is pure (no I/O) and imports nothing of claudemesh but messages (for
// the session id's form, which the daemon's session registry checks), so
// that the receiver, a process that runs at every tool call of every
// agent, links no more than it uses: it links messages already, through
// persistence. The daemon's hooks worker reads the same payload.
//
// What the payload keeps is what presence and the live state need — the
// tool's name and a one-line detail, the first line of a prompt, a
// notification's message — each cut to a few hundred bytes; a tool's input
// and output, the transcript and the rest of the hook JSON are dropped.
package hookevent

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Internal event types (spec: "Internal event types").
const (
	SessionStart     = "session_start"
	UserPromptSubmit = "user_prompt_submit"
	ToolUse          = "tool_use"
	ToolDone         = "tool_done"
	AgentStop        = "agent_stop"
	Notification     = "notification"
	Error            = "error"
	SessionEnd       = "session_end"
)

// Agents the receiver understands (--agent).
const (
	Claude = "claude"
	Codex  = "codex"
)

// Limits of the normalised payload's fields, in bytes.
const (
	MaxDetail  = 200  // a tool's one-line detail (a command, a path)
	MaxPrompt  = 200  // the first line of a prompt
	MaxMessage = 500  // a notification's message, a turn summary, an error
	MaxShort   = 64   // names: tool, kind, model, mesh, display name
	MaxCwd     = 4096 // as messages.MaxSessionCwd
	// MaxInput bounds the hook JSON the receiver reads; a PostToolUse
	// carries the tool's whole output, which the payload drops.
	MaxInput = 16 << 20
)

// handled is the allowlist: the types the daemon has a handler for.
var handled = map[string]bool{SessionStart: true, UserPromptSubmit: true, ToolUse: true, ToolDone: true,
	AgentStop: true, Notification: true, Error: true, SessionEnd: true}

// Handled reports whether the daemon handles event type t (the allowlist).
func Handled(t string) bool { return handled[t] }

// critical are the types never dropped nor coalesced (spec "Backpressure").
var critical = map[string]bool{SessionStart: true, UserPromptSubmit: true, AgentStop: true, SessionEnd: true,
	Notification: true, Error: true}

// Critical reports whether t is of the critical class; every other type,
// unknown ones included, is bursty: coalesced latest-wins, evicted first.
func Critical(t string) bool { return critical[t] }

// claudeTypes maps Claude Code's hook events to internal types. A tool call
// that failed is an error; SubagentStop is an agent_stop of a subagent
// (the payload says so: the session itself works on).
var claudeTypes = map[string]string{
	"SessionStart": SessionStart, "UserPromptSubmit": UserPromptSubmit, "PreToolUse": ToolUse,
	"PostToolUse": ToolDone, "PostToolUseFailure": Error, "Stop": AgentStop, "SubagentStop": AgentStop,
	"Notification": Notification, "SessionEnd": SessionEnd,
}

// codexTypes maps the events of Codex's `notify` program (the JSON's
// "type") to internal types.
var codexTypes = map[string]string{"agent-turn-complete": AgentStop, "approval-requested": Notification}

// TypeOf is the internal type of an agent's event name; an event without a
// mapping becomes its snake_case name, which no handler takes.
func TypeOf(agent, event string) string {
	table := claudeTypes
	if agent == Codex {
		table = codexTypes
	}
	if t, ok := table[event]; ok {
		return t
	}
	return snake(event)
}

// snake is "PreCompact" as "pre_compact", "agent-turn-complete" as
// "agent_turn_complete", at most MaxShort bytes of [a-z0-9_].
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r >= 'A' && r <= 'Z':
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == '_' || r == ' ' || r == '.':
			b.WriteByte('_')
		}
		if b.Len() >= MaxShort {
			break
		}
	}
	return b.String()
}

// Payload is the normalised JSON of a hook outbox row (version 1).
type Payload struct {
	V     int    `json:"v"`
	Event string `json:"event"` // the agent's own event name, e.g. PreToolUse
	Cwd   string `json:"cwd,omitempty"`
	// Tool is the tool of a tool_use, tool_done or failed tool call; Detail
	// its one-line gist: a command, a file, a pattern, a URL.
	Tool   string `json:"tool,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Prompt is the first line of a submitted prompt.
	Prompt string `json:"prompt,omitempty"`
	// Message is a notification's text, a finished turn's last message, or
	// a failed tool's error.
	Message string `json:"message,omitempty"`
	// Kind is a notification's type (permission_prompt, idle_prompt, …),
	// how a session started (startup, resume, clear, compact) or why it
	// ended (clear, logout, prompt_input_exit, other, …).
	Kind     string `json:"kind,omitempty"`
	Subagent bool   `json:"subagent,omitempty"` // a SubagentStop: the session is still at work
	Model    string `json:"model,omitempty"`
	// PID is the agent's process (the hook's parent, past a shell), which a
	// session the hook registers is tied to; Mesh and DisplayName come
	// from the agent's environment (`claudemesh launch` sets them).
	PID         int    `json:"pid,omitempty"`
	Mesh        string `json:"mesh,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
}

// Env is what the receiver's environment says about the agent session.
type Env struct {
	// SessionID is CLAUDEMESH_SESSION_ID: under `claudemesh launch` the id
	// the session is registered as, which wins over the hook's own.
	SessionID   string
	Mesh        string // CLAUDEMESH_MESH
	DisplayName string // CLAUDEMESH_DISPLAY_NAME
	PID         int    // the agent's process
}

// Row is one hook outbox row as the receiver inserts it.
type Row struct {
	SessionID string
	Agent     string
	EventType string
	Payload   []byte
}

// ErrDropped says the event normalises to a type without a handler: the
// receiver drops it, which is not a failure.
var ErrDropped = errors.New("event not forwarded")

// claudeInput is the part of Claude Code's hook JSON the payload keeps.
type claudeInput struct {
	SessionID        string          `json:"session_id"`
	HookEventName    string          `json:"hook_event_name"`
	Cwd              string          `json:"cwd"`
	ToolName         string          `json:"tool_name"`
	ToolInput        json.RawMessage `json:"tool_input"`
	Prompt           string          `json:"prompt"`
	Message          string          `json:"message"`
	NotificationType string          `json:"notification_type"`
	Source           string          `json:"source"`
	Reason           string          `json:"reason"`
	Model            json.RawMessage `json:"model"` // a string, or an object with an id
	Error            string          `json:"error"`
	LastMessage      string          `json:"last_assistant_message"`
	AgentType        string          `json:"agent_type"`
}

// codexInput is Codex's `notify` JSON.
type codexInput struct {
	Type          string   `json:"type"`
	ThreadID      string   `json:"thread-id"`
	Cwd           string   `json:"cwd"`
	InputMessages []string `json:"input-messages"`
	LastMessage   string   `json:"last-assistant-message"`
}

// Normalize maps an agent's hook event and its JSON to a row. event is the
// name the hook was installed for (empty: the JSON's own). It returns
// ErrDropped for an event no handler takes, and another error for input
// that names no usable session.
func Normalize(agent, event string, raw []byte, env Env) (Row, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > MaxInput {
		return Row{}, fmt.Errorf("hook input is %d bytes, more than %d", len(raw), MaxInput)
	}
	var p Payload
	var sessionID string
	switch agent {
	case Claude, "":
		agent = Claude
		var in claudeInput
		if err := decodeObject(raw, &in); err != nil {
			return Row{}, err
		}
		if event == "" {
			event = in.HookEventName
		}
		sessionID = in.SessionID
		p = claudePayload(event, &in)
	case Codex:
		var in codexInput
		if err := decodeObject(raw, &in); err != nil {
			return Row{}, err
		}
		if event == "" || event == "notify" {
			event = in.Type
		}
		sessionID = in.ThreadID
		p = Payload{Event: event, Cwd: in.Cwd, Message: clip(in.LastMessage, MaxMessage)}
		if n := len(in.InputMessages); n > 0 {
			p.Prompt = firstLine(in.InputMessages[n-1], MaxPrompt)
		}
	default:
		return Row{}, fmt.Errorf("unknown agent %q (claude or codex)", agent)
	}
	t := TypeOf(agent, event)
	if !Handled(t) {
		return Row{}, ErrDropped
	}
	if env.SessionID != "" {
		sessionID = env.SessionID
	}
	if !messages.ValidSessionID(sessionID) {
		return Row{}, fmt.Errorf("%s hook %s: session id %q is not 1-128 of A-Z, a-z, 0-9, '.', '_' and '-'", agent, event,
			clip(sessionID, MaxShort))
	}
	p.V, p.Event = 1, clip(event, MaxShort)
	p.Cwd = clip(p.Cwd, MaxCwd)
	p.PID, p.Mesh, p.DisplayName = env.PID, clip(env.Mesh, MaxShort), clip(env.DisplayName, MaxShort)
	payload, err := json.Marshal(&p)
	if err != nil {
		return Row{}, err
	}
	return Row{SessionID: sessionID, Agent: agent, EventType: t, Payload: payload}, nil
}

// claudePayload keeps what each of Claude Code's events says that matters.
func claudePayload(event string, in *claudeInput) Payload {
	p := Payload{Cwd: in.Cwd}
	switch event {
	case "SessionStart":
		p.Kind, p.Model = clip(in.Source, MaxShort), modelName(in.Model)
	case "UserPromptSubmit":
		p.Prompt = firstLine(in.Prompt, MaxPrompt)
	case "PreToolUse", "PostToolUse", "PostToolUseFailure":
		p.Tool, p.Detail = clip(in.ToolName, MaxShort), toolDetail(in.ToolInput)
		p.Message = clip(in.Error, MaxMessage)
	case "Stop", "SubagentStop":
		p.Message, p.Subagent = clip(in.LastMessage, MaxMessage), event == "SubagentStop"
		p.Kind = clip(in.AgentType, MaxShort)
	case "Notification":
		p.Message, p.Kind = clip(in.Message, MaxMessage), clip(in.NotificationType, MaxShort)
	case "SessionEnd":
		p.Kind = clip(in.Reason, MaxShort)
	}
	return p
}

// decodeObject decodes a JSON object into v; fields of the wrong type are
// an error, unknown fields are not (agents add fields).
func decodeObject(raw []byte, v any) error {
	if len(raw) == 0 || raw[0] != '{' {
		return errors.New("hook input is not a JSON object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("hook input: %w", err)
	}
	return nil
}

// modelName reads SessionStart's model: a string, or an object with an id
// or a display_name.
func modelName(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return clip(s, MaxShort)
	}
	var o struct {
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return clip(cmp.Or(o.ID, o.DisplayName), MaxShort)
	}
	return ""
}

// detailKeys are the tool input fields that say in a line what a call
// does, in the order they are looked for.
var detailKeys = []string{"command", "file_path", "notebook_path", "path", "pattern", "url", "query", "description", "prompt"}

// toolDetail is the gist of a tool's input: its first detail key that is a
// string (a path by its base name).
func toolDetail(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var in map[string]json.RawMessage
	if json.Unmarshal(raw, &in) != nil {
		return ""
	}
	for _, k := range detailKeys {
		var s string
		if json.Unmarshal(in[k], &s) != nil || strings.TrimSpace(s) == "" {
			continue
		}
		if k == "file_path" || k == "notebook_path" {
			s = filepath.Base(s)
		}
		return firstLine(s, MaxDetail)
	}
	return ""
}

// firstLine is s's first non-empty line, clipped.
func firstLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	return clip(s, n)
}

// clip is s as valid UTF-8 without control characters (tabs become
// spaces), at most n bytes, cut at a rune boundary.
func clip(s string, n int) string {
	if s == "" {
		return ""
	}
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Decode reads a row's payload; a payload that is not a JSON object is an
// error (the worker marks such a row delivered with it, never retried).
func Decode(payload []byte) (*Payload, error) {
	var p Payload
	if !json.Valid(payload) {
		return nil, errors.New("payload is not valid JSON")
	}
	if err := decodeObject(bytes.TrimSpace(payload), &p); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return &p, nil
}
