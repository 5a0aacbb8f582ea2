package hookoutbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
}

// Receive reads the hook's JSON (payload, else stdin), normalises it,
// drops an event no handler takes, appends one row and pokes the daemon.
// It never fails the hook: a failure is one line on Stderr, recorded in
// Errors for the daemon to count. now is when the hook ran. It returns
// the event's row as normalised, written or not (false: no event to
// speak of, dropped or unreadable).
func (r *Receiver) Receive(agent, event, payload string, stdin io.Reader, now time.Time) (hookevent.Row, bool) {
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
			return hookevent.Row{}, false
		}
	}
	row, err := hookevent.Normalize(agent, event, raw, r.Env)
	if errors.Is(err, hookevent.ErrDropped) {
		return hookevent.Row{}, false
	}
	if err != nil {
		fail(err)
		return hookevent.Row{}, false
	}
	w, err := Open(r.DB, r.Create)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*BusyTimeout)
		err = w.Append(ctx, Row{SessionID: row.SessionID, Agent: row.Agent, EventType: row.EventType, Payload: row.Payload}, now)
		cancel()
	}
	if err != nil {
		fail(err)
		return row, true
	}
	_ = Poke(r.Wake) // a daemon that is down reads the row when it starts
	_ = w.BoundWAL(context.Background())
	// w is not closed: see Writer.Close.
	return row, true
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
