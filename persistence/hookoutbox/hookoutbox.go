// Package hookoutbox is the receiver's side of the agent-hook outbox
// (spec/hook-outbox.md): it appends one row to hooks.db, directly, because
// the daemon may not be running; it pokes the daemon's worker without
// waiting; and it records a failure to write where the daemon counts it.
//
// It is the one code outside the daemon's store that writes a daemon
// database, and it does only that: one INSERT. It links no more than the
// SQLite driver, so that the short-lived `claudemesh hook` process pays
// for nothing else (the schema, when hooks.db has none yet, comes from the
// caller: persistence.CreateHooks). Every call is made to be quick: the
// file is opened without a check of its journal mode (the daemon and
// persistence.CreateHooks set WAL, which SQLite keeps in the file), the
// commit is not fsynced (synchronous=NORMAL: in the WAL, safe from a crash
// of any process, not from a power cut), and the poke is one datagram.
package hookoutbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// BusyTimeout is how long an insert waits for the daemon's write
// transaction (a store batch lasts milliseconds).
const BusyTimeout = 5 * time.Second

// insertSQL is the receiver's one statement: a new row is due at once.
const insertSQL = `INSERT INTO hook_outbox (session_id, agent, event_type, payload, created_at, next_attempt_at)
 VALUES (?, ?, ?, ?, ?, ?)`

// Row is one row to append.
type Row struct {
	SessionID string
	Agent     string
	EventType string
	Payload   []byte
}

// Writer appends rows to one hooks.db.
type Writer struct {
	path   string
	dsn    string
	db     *sql.DB
	create func(ctx context.Context, path string) error
}

// Open returns a writer of the hooks.db at path; create makes the file and
// its schema when the first insert finds neither (nil: that insert fails).
// Nothing is opened until the first Append.
func Open(path string, create func(ctx context.Context, path string) error) (*Writer, error) {
	w := &Writer{path: path, create: create,
		dsn: fmt.Sprintf("file:%s?mode=rw&_pragma=busy_timeout(%d)&_pragma=synchronous(NORMAL)", path, BusyTimeout.Milliseconds())}
	return w, w.open()
}

func (w *Writer) open() error {
	db, err := sql.Open("sqlite", w.dsn)
	if err != nil {
		return fmt.Errorf("open %s: %w", w.path, err)
	}
	db.SetMaxOpenConns(1)
	w.db = db
	return nil
}

// Append inserts row, created (and due) at now. A hooks.db that is not
// there yet, or not yet whole (notReady), is created through the create
// function and the insert tried once more, on a fresh connection.
func (w *Writer) Append(ctx context.Context, row Row, now time.Time) error {
	ms := now.UnixMilli()
	insert := func() error {
		_, err := w.db.ExecContext(ctx, insertSQL, row.SessionID, row.Agent, row.EventType, string(row.Payload), ms, ms)
		return err
	}
	err := insert()
	if err == nil || !notReady(err) || w.create == nil {
		return wrap(w.path, err)
	}
	cerr := w.create(ctx, w.path) // receivers racing take turns; the insert decides
	w.db.Close()
	if err := w.open(); err != nil {
		return wrap(w.path, errors.Join(err, cerr))
	}
	if err = insert(); err != nil && cerr != nil {
		err = errors.Join(err, cerr)
	}
	return wrap(w.path, err)
}

// MaxWAL is the size of hooks.db-wal past which a receiver empties it
// (Writer.BoundWAL). While the daemon is down every receiver is the first
// connection to hooks.db and rebuilds SQLite's WAL index by reading the
// whole WAL, and no checkpoint ever restarts it (the index that would tell
// it the WAL was copied dies with each process), so without a bound each
// hook would take longer than the one before: 5 ms at the first event,
// 12 ms after 1,500 on the machine of docs/BENCHMARKS.md. 256 KiB is some
// 20 events; the checkpoint that empties it costs two fsyncs, once in
// those 20.
const MaxWAL = 256 << 10

// BoundWAL copies the WAL into hooks.db and truncates it when it has grown
// past MaxWAL, without waiting: when the daemon (or another receiver) is
// using the file the checkpoint is left to it, and the daemon running
// keeps the WAL index alive anyway. It is best effort: an error changes
// nothing stored.
func (w *Writer) BoundWAL(ctx context.Context) error {
	st, err := os.Stat(w.path + "-wal")
	if err != nil || st.Size() <= MaxWAL {
		return nil
	}
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	_, rerr := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", BusyTimeout.Milliseconds()))
	return errors.Join(err, rerr)
}

// Close closes the database. The receiver process does not call it: as
// the last connection to hooks.db (the daemon down), closing checkpoints
// the WAL into the file with two fsyncs at every event; BoundWAL does that
// once in some 20. An exit without it leaves the commit in the WAL,
// exactly as a crash after the commit would, and the next opener finds it
// there.
func (w *Writer) Close() error { return w.db.Close() }

func wrap(path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("write %s: %w", path, err)
}

// notReady reports the errors of a hooks.db that is not there yet, or
// not yet whole: the file cannot be opened (mode=rw does not create it),
// it has no table, or the connection met it while another process was
// creating it, which SQLite then refuses to write through ("attempt to
// write a readonly database"; a file that really is read-only fails the
// same way once more, through a fresh connection, after the attempt to
// create it).
func notReady(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_CANTOPEN || se.Code()&0xff == sqlite3.SQLITE_READONLY) {
		return true
	}
	return strings.Contains(err.Error(), "no such table")
}

// Poke sends one datagram to the daemon's wake socket so that its worker
// looks at the outbox before its next tick. It never waits: a daemon that
// is down (no socket, nobody listening) or busy (its queue full) is left
// alone, and the error says which.
func Poke(socket string) error {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		return err
	}
	return syscall.Sendto(fd, []byte{1}, 0, &syscall.SockaddrUnix{Name: socket})
}

// MaxFailureLog bounds hooks.errors: past it, failures go on being printed
// but are no longer counted (the count then reads "at least").
const MaxFailureLog = 1 << 20

// RecordFailure appends one line for a receiver that could not write
// hooks.db — "<unix ms>\t<agent>\t<event>\t<error>" — to the file at path,
// which the daemon counts (messages.HookHealth.ReceiverWriteErrors).
func RecordFailure(path string, now time.Time, agent, event string, failure error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() >= MaxFailureLog {
		return nil
	}
	line := fmt.Sprintf("%d\t%s\t%s\t%s\n", now.UnixMilli(), oneLine(agent), oneLine(event), oneLine(failure.Error()))
	_, err = f.WriteString(line)
	return err
}

// Failures reads the file RecordFailure appends to: how many lines it has
// and the newest one (0 and "" for no file).
func Failures(path string) (count int, last string, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return 0, "", nil
	}
	return len(lines), lines[len(lines)-1], nil
}

// Failure is one line of the file RecordFailure appends to.
type Failure struct {
	At           time.Time
	Agent, Event string // as the receiver was given them ("" for none)
	Err          string
}

// ParseFailure reads a line RecordFailure wrote; false for any other.
func ParseFailure(line string) (Failure, bool) {
	f := strings.SplitN(line, "\t", 4)
	if len(f) != 4 {
		return Failure{}, false
	}
	ms, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return Failure{}, false
	}
	return Failure{At: time.UnixMilli(ms), Agent: f[1], Event: f[2], Err: f[3]}, true
}

// oneLine is s without line breaks or tabs.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}
