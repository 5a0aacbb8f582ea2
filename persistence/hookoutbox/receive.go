package hookoutbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages/hookevent"
)

// Receiver is `claudemesh hook` (spec "Receiver"), wired by its caller:
// the files of the daemon directory, how to create hooks.db, what the
// environment says of the session.
type Receiver struct {
	DB     string // hooks.db
	Wake   string // hooks.wake, the daemon's wake socket
	Errors string // hooks.errors, where failures are counted
	// Create makes hooks.db and its schema (the daemon directory too)
	// when the first insert finds neither.
	Create func(ctx context.Context, path string) error
	Env    hookevent.Env
	Stderr io.Writer
	// SessionStarted, when set, is told the session id of a session_start
	// event (before its row is written).
	SessionStarted func(sessionID string)
}

// Receive reads the hook's JSON (payload, else stdin), normalises it,
// drops an event no handler takes, appends one row and pokes the daemon.
// It never fails the hook: a failure is one line on Stderr, recorded in
// Errors for the daemon to count. now is when the hook ran.
func (r *Receiver) Receive(agent, event, payload string, stdin io.Reader, now time.Time) {
	if strings.HasPrefix(strings.TrimSpace(event), "{") { // Codex's notify: the JSON is the only argument
		event, payload = "", event
	}
	fail := func(err error) {
		where := "counted in " + r.Errors
		if rerr := RecordFailure(r.Errors, now, agent, event, err); rerr != nil {
			where = "not counted: " + rerr.Error()
		}
		fmt.Fprintf(r.Stderr, "claudemesh hook: %v (event not recorded; %s)\n", err, where)
	}
	raw := []byte(payload)
	if payload == "" {
		var err error
		if raw, err = readInput(stdin); err != nil {
			fail(err)
			return
		}
	}
	row, err := hookevent.Normalize(agent, event, raw, r.Env)
	if errors.Is(err, hookevent.ErrDropped) {
		return
	}
	if err != nil {
		fail(err)
		return
	}
	if row.EventType == hookevent.SessionStart && r.SessionStarted != nil {
		r.SessionStarted(row.SessionID)
	}
	w, err := Open(r.DB, r.Create)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*BusyTimeout)
		err = w.Append(ctx, Row{SessionID: row.SessionID, Agent: row.Agent, EventType: row.EventType, Payload: row.Payload}, now)
		cancel()
	}
	if err != nil {
		fail(err)
		return
	}
	_ = Poke(r.Wake) // a daemon that is down reads the row when it starts
	_ = w.BoundWAL(context.Background())
	// w is not closed: see Writer.Close.
}

// readInput reads the hook's JSON from stdin, at most hookevent.MaxInput
// bytes (a tool's output can be large; the rest is drained so that the
// agent's write does not fail).
func readInput(stdin io.Reader) ([]byte, error) {
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return nil, errors.New("no hook JSON: the receiver reads it on stdin (the agent's hook pipes it there)")
		}
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, hookevent.MaxInput+1))
	if err != nil {
		return nil, fmt.Errorf("read the hook JSON: %w", err)
	}
	if len(raw) > hookevent.MaxInput {
		_, _ = io.Copy(io.Discard, stdin)
	}
	return raw, nil
}

// shells are the programs an agent may run a hook command through; the
// agent is the shell's parent.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "fish": true, "ksh": true}

// AgentPID is the agent's process: the hook's parent, or its grandparent
// when the parent is the shell the agent ran the hook command with. A
// session the hook registers is tied to it (the daemon's reaper drops the
// session when it exits). Without /proc it is the parent.
func AgentPID() int {
	ppid := os.Getppid()
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
	if err != nil || !shells[strings.TrimSpace(string(comm))] {
		return ppid
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/stat")
	if err != nil {
		return ppid
	}
	// pid (comm) state ppid …: comm may hold spaces and parentheses.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 2 {
		return ppid
	}
	if gp, err := strconv.Atoi(fields[1]); err == nil && gp > 1 {
		return gp
	}
	return ppid
}
