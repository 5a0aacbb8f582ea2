package persistence

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Bounds of the SSE event log (ARCHITECTURE A24): TrimEvents keeps at most
// DefaultEventsKeep events and none older than DefaultEventsMaxAge.
const (
	DefaultEventsKeep   = 100_000
	DefaultEventsMaxAge = 24 * time.Hour
)

// ErrEventsGone means a client resuming after an event id cannot be given
// everything it missed: the events after that id were trimmed from the log,
// or the id is newer than any this log issued (the inbox was recreated).
// The SSE layer tells the client to catch up through /v1/inbox?since= and
// then streams live events.
var ErrEventsGone = errors.New("events after this id are no longer in the log")

// Event is one persisted SSE event. Data is one line of JSON.
type Event struct {
	ID        int64  `db:"id"`
	Name      string `db:"name"`
	Data      []byte `db:"data"`
	CreatedAt int64  `db:"created_at"` // Unix ms
}

// AppendEvent stores an event and returns its id. Ids are strictly
// increasing and never reused, even after trims; within one open of the
// inbox they are consecutive, and each open jumps EventIDGap ahead. data
// must be valid JSON on one line (it becomes the SSE data: line). Publish
// an event to live streams only after the batch that appended it
// committed: a rolled-back id is issued again.
func (in *Inbox) AppendEvent(tx *Tx, name string, data []byte, now int64) (id int64, err error) {
	if name == "" || strings.ContainsAny(name, "\r\n") {
		return 0, fmt.Errorf("append event: invalid name %q", name)
	}
	if bytes.ContainsAny(data, "\r\n") || !json.Valid(data) {
		return 0, fmt.Errorf("append event %s: data is not one line of JSON", name)
	}
	return in.insertEvent(tx, name, data, now)
}

// EventData is a value that encodes itself as json.Marshal would (one line
// of valid JSON), faster.
type EventData interface{ Marshal() ([]byte, error) }

// AppendJSON stores an event whose data is v in JSON, and returns its id
// and data: AppendEvent for a value, which encodes as json.Marshal renders
// it, as one line of valid JSON, so the data needs no check.
func (in *Inbox) AppendJSON(tx *Tx, name string, v EventData, now int64) (id int64, data []byte, err error) {
	if name == "" || strings.ContainsAny(name, "\r\n") {
		return 0, nil, fmt.Errorf("append event: invalid name %q", name)
	}
	if data, err = v.Marshal(); err != nil {
		return 0, nil, fmt.Errorf("append event %s: %w", name, err)
	}
	id, err = in.insertEvent(tx, name, data, now)
	return id, data, err
}

func (in *Inbox) insertEvent(tx *Tx, name string, data []byte, now int64) (id int64, err error) {
	res, err := tx.Prepared(in.appendEvent).Exec(name, string(data), now)
	if err == nil {
		id, err = res.LastInsertId()
	}
	if err != nil {
		return 0, fmt.Errorf("append event %s: %w", name, err)
	}
	return id, nil
}

// EventsAfter returns up to limit events with ids greater than afterID, in
// ascending id order (limit <= 0 means DefaultEventsKeep). It returns
// ErrEventsGone when some event after afterID was trimmed (afterID is below
// the highest id trimmed) or when afterID is above LastEventID. afterID 0
// asks for the whole log.
func (in *Inbox) EventsAfter(tx *Tx, afterID int64, limit int) ([]Event, error) {
	if afterID < 0 {
		return nil, fmt.Errorf("events after %d: %w", afterID, ErrEventsGone)
	}
	if limit <= 0 {
		limit = DefaultEventsKeep
	}
	last, err := in.LastEventID(tx)
	if err != nil {
		return nil, err
	}
	var trimmed int64
	if err := tx.Prepared(in.trimmedThrough).Get(&trimmed); err != nil {
		return nil, fmt.Errorf("events after %d: %w", afterID, err)
	}
	if afterID > last || afterID < trimmed {
		return nil, fmt.Errorf("events after %d (log issued up to %d, trimmed through %d): %w", afterID, last, trimmed, ErrEventsGone)
	}
	var evs []Event
	if err := tx.Prepared(in.eventsAfter).Select(&evs, afterID, limit); err != nil {
		return nil, fmt.Errorf("events after %d: %w", afterID, err)
	}
	return evs, nil
}

// LastEventID returns the highest event id ever issued by this log, 0 if
// none; it does not go down when events are trimmed.
func (in *Inbox) LastEventID(tx *Tx) (int64, error) {
	var id int64
	if err := tx.Prepared(in.lastEvent).Get(&id); err != nil {
		return 0, fmt.Errorf("last event id: %w", err)
	}
	return id, nil
}

// TrimEvents bounds the log: it deletes the events beyond the keepNewest
// newest and those created before olderThan (Unix ms), at most limit of
// them a call, and returns how many it deleted. keepNewest <= 0 or
// olderThan <= 0 disables that bound. It always deletes a prefix of ids
// (everything up to the newest event that is too old, even if the clock
// went back) and records the highest id deleted for EventsAfter.
func (in *Inbox) TrimEvents(tx *Tx, keepNewest int, olderThan int64, limit int) (int64, error) {
	var byCount, byAge int64
	if keepNewest > 0 {
		// Ids have holes (EventIDGap): count rows, not ids.
		err := tx.Get(&byCount, "SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?", keepNewest)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("trim events: %w", err)
		}
	}
	if olderThan > 0 {
		if err := tx.Get(&byAge, "SELECT COALESCE(MAX(id), 0) FROM events WHERE created_at < ?", olderThan); err != nil {
			return 0, fmt.Errorf("trim events: %w", err)
		}
	}
	cut := max(byCount, byAge)
	if cut <= 0 {
		return 0, nil
	}
	var limitCut sql.NullInt64 // the limit-th oldest id
	if err := tx.Get(&limitCut, "SELECT id FROM events ORDER BY id LIMIT 1 OFFSET ?", limit-1); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("trim events: %w", err)
	}
	if limitCut.Valid {
		cut = min(cut, limitCut.Int64)
	}
	n, err := affected(tx.Exec("DELETE FROM events WHERE id <= ?", cut))
	if err != nil {
		return 0, fmt.Errorf("trim events: %w", err)
	}
	if _, err := tx.Exec("UPDATE events_trimmed SET through = max(through, ?)", cut); err != nil {
		return 0, fmt.Errorf("trim events: %w", err)
	}
	return n, nil
}
