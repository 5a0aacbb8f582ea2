package hookevent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/claudemesh/claudemesh-go/messages"
)

// sample is one of testdata's hook inputs, as the agent sends it.
func sample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const claudeSession = "9f3c2a1e-4b5d-4c6e-8f7a-0b1c2d3e4f50"

// TestNormalizeClaude runs the JSON Claude Code sends for each event
// through the receiver's mapping (spec: "Claude Code mapping").
func TestNormalizeClaude(t *testing.T) {
	env := Env{PID: 4242}
	cases := []struct {
		event string
		typ   string
		want  Payload
	}{
		{"SessionStart", SessionStart, Payload{Kind: "startup", Model: "claude-sonnet-4-6"}},
		{"UserPromptSubmit", UserPromptSubmit, Payload{Prompt: "Fix the flaky test in integration/e2e_test.go …"}},
		{"PreToolUse", ToolUse, Payload{Tool: "Bash", Detail: "go test ./integration/ -run TestE2E -count=20"}},
		{"PostToolUse", ToolDone, Payload{Tool: "Edit", Detail: "e2e_test.go"}},
		{"PostToolUseFailure", Error, Payload{Tool: "Bash", Detail: "make lint", Message: "Command failed with exit code 2"}},
		{"Notification", Notification, Payload{Message: "Claude needs your permission to use Bash", Kind: "permission_prompt"}},
		{"Stop", AgentStop, Payload{Message: "The test waited on a sleep; it now polls for the condition. 20 runs pass."}},
		{"SubagentStop", AgentStop, Payload{Subagent: true, Kind: "Explore"}},
		{"SessionEnd", SessionEnd, Payload{Kind: "prompt_input_exit"}},
	}
	for _, c := range cases {
		t.Run(c.event, func(t *testing.T) {
			row, err := Normalize(Claude, c.event, sample(t, "claude-"+c.event), env)
			if err != nil {
				t.Fatal(err)
			}
			if row.SessionID != claudeSession || row.Agent != Claude || row.EventType != c.typ {
				t.Fatalf("row %+v", row)
			}
			got, err := Decode(row.Payload)
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			want.V, want.Event, want.Cwd, want.PID = 1, c.event, "/home/ada/src/mesh", 4242
			if *got != want {
				t.Errorf("payload\n got %+v\nwant %+v", *got, want)
			}
		})
	}
}

// TestNormalizeEventFromJSON: without an event argument the JSON's
// hook_event_name decides; the argument wins over it.
func TestNormalizeEventFromJSON(t *testing.T) {
	row, err := Normalize(Claude, "", sample(t, "claude-PreToolUse"), Env{})
	if err != nil || row.EventType != ToolUse {
		t.Fatalf("%+v, %v", row, err)
	}
	row, err = Normalize(Claude, "PostToolUse", sample(t, "claude-PreToolUse"), Env{})
	if err != nil || row.EventType != ToolDone {
		t.Fatalf("%+v, %v", row, err)
	}
}

// TestNormalizeLaunchedSession: under `claudemesh launch` the environment's
// session id is the registered one and wins over Claude Code's own.
func TestNormalizeLaunchedSession(t *testing.T) {
	row, err := Normalize(Claude, "Stop", sample(t, "claude-Stop"),
		Env{SessionID: "01JABCDEF", Mesh: "local", DisplayName: "ada-mesh"})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := Decode(row.Payload)
	if row.SessionID != "01JABCDEF" || p.Mesh != "local" || p.DisplayName != "ada-mesh" {
		t.Fatalf("%+v %+v", row, p)
	}
}

func TestNormalizeCodex(t *testing.T) {
	raw := sample(t, "codex-agent-turn-complete")
	for _, event := range []string{"", "agent-turn-complete", "notify"} {
		row, err := Normalize(Codex, event, raw, Env{})
		if err != nil {
			t.Fatalf("%q: %v", event, err)
		}
		p, _ := Decode(row.Payload)
		if row.SessionID != "b5f6c1c2-1111-2222-3333-444455556666" || row.EventType != AgentStop || row.Agent != Codex ||
			p.Prompt != "Rename `foo` to `bar` and update the README." || !strings.HasPrefix(p.Message, "Rename complete") {
			t.Fatalf("%q: %+v %+v", event, row, p)
		}
	}
}

func TestNormalizeRefuses(t *testing.T) {
	cases := []struct {
		name, agent, event, input string
	}{
		{"not json", Claude, "Stop", "session_id=x"},
		{"an array", Claude, "Stop", `[{"session_id":"x"}]`},
		{"no session", Claude, "Stop", `{"hook_event_name":"Stop"}`},
		{"bad session", Claude, "Stop", `{"session_id":"../../etc"}`},
		{"long session", Claude, "Stop", `{"session_id":"` + strings.Repeat("a", 129) + `"}`},
		{"wrong type", Claude, "Stop", `{"session_id":42}`},
		{"unknown agent", "gemini", "Stop", `{"session_id":"x"}`},
	}
	for _, c := range cases {
		if _, err := Normalize(c.agent, c.event, []byte(c.input), Env{}); err == nil || errors.Is(err, ErrDropped) {
			t.Errorf("%s: want an error, got %v", c.name, err)
		}
	}
	if _, err := Normalize(Claude, "PreCompact", []byte(`{"session_id":"x"}`), Env{}); !errors.Is(err, ErrDropped) {
		t.Errorf("PreCompact: want ErrDropped, got %v", err)
	}
}

// TestClasses is the spec's backpressure table.
func TestClasses(t *testing.T) {
	for _, typ := range []string{SessionStart, UserPromptSubmit, AgentStop, SessionEnd, Notification, Error} {
		if !Critical(typ) {
			t.Errorf("%s is critical", typ)
		}
	}
	for _, typ := range []string{ToolUse, ToolDone, "pre_compact", ""} {
		if Critical(typ) {
			t.Errorf("%s is bursty", typ)
		}
	}
	if !Handled(SessionEnd) || Handled("pre_compact") || !Handled(ToolDone) {
		t.Error("the allowlist")
	}
	if got := TypeOf(Claude, "PreCompact"); got != "pre_compact" {
		t.Errorf("TypeOf(PreCompact) = %q", got)
	}
}

func TestClip(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"héllo", 2, "h"},
		{"héllo", 3, "hé"},
		{"a\tb\x00c\x7f", 10, "a bc"},
		{"\xff\xfeok", 10, "ok"},
		{"  spaced  ", 10, "spaced"},
	}
	for _, c := range cases {
		if got := clip(c.in, c.n); got != c.want {
			t.Errorf("clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// FuzzNormalize holds the normaliser to its promises on any input: no
// panic; a row names a valid session and a handled type; its payload is a
// JSON object of valid UTF-8 whose fields keep their limits.
func FuzzNormalize(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, n := range names {
		b, _ := os.ReadFile(n)
		agent := Claude
		if strings.HasPrefix(filepath.Base(n), "codex-") {
			agent = Codex
		}
		f.Add(agent, "", b)
	}
	f.Add(Claude, "PreToolUse", []byte(`{"session_id":"s","tool_input":{"command":"a\nb"}}`))
	f.Fuzz(func(t *testing.T, agent, event string, raw []byte) {
		row, err := Normalize(agent, event, raw, Env{})
		if err != nil {
			return
		}
		if !messages.ValidSessionID(row.SessionID) || !Handled(row.EventType) {
			t.Fatalf("row %+v", row)
		}
		if !utf8.Valid(row.Payload) {
			t.Fatalf("payload not UTF-8: %q", row.Payload)
		}
		p, err := Decode(row.Payload)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []struct {
			v string
			n int
		}{{p.Detail, MaxDetail}, {p.Prompt, MaxPrompt}, {p.Message, MaxMessage}, {p.Tool, MaxShort}, {p.Kind, MaxShort},
			{p.Event, MaxShort}, {p.Model, MaxShort}, {p.Cwd, MaxCwd}} {
			if len(f.v) > f.n || strings.ContainsAny(f.v, "\x00\n\r\t") {
				t.Fatalf("field %q exceeds %d or has control characters", f.v, f.n)
			}
		}
		var again map[string]any
		if err := json.Unmarshal(row.Payload, &again); err != nil {
			t.Fatal(err)
		}
	})
}
