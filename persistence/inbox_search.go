package persistence

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Inbox search reads a query as the broker's memory recall does: its words
// alone (messages.SearchTerms), each an FTS5 string, never an operator.
// Messages with every word are asked first, with any word only when none
// has them all; those with the words as an exact phrase come first, then
// by bm25 over the subject (weighted twice) and the body. A match of more
// than maxRankedInbox messages is answered newest first instead: ranking
// costs some µs a message, and words that common say little.

// maxSearchTerms bounds the words of a query that are searched.
const maxSearchTerms = 32

// maxRankedInbox bounds the messages a search ranks by relevance.
var maxRankedInbox = 2000

// searchColumns are inboxColumns read from the join of the index and the
// inbox (i).
var searchColumns = "i." + strings.Join(strings.FieldsFunc(inboxColumns, func(r rune) bool {
	return r == ',' || unicode.IsSpace(r)
}), ", i.")

// Search returns the messages of the inbox (of q.Mesh, when set; never
// one held as a contact request) that match q.Query, best first, at most
// q.Limit. A query with no words matches nothing.
func (in *Inbox) Search(tx *Tx, q *messages.SearchInbox) ([]InboxRow, error) {
	terms := messages.SearchTerms(q.Query, maxSearchTerms)
	if len(terms) == 0 {
		return nil, nil
	}
	if err := in.IndexPending(tx); err != nil {
		return nil, err
	}
	rows, err := in.search(tx, q, terms, " AND ")
	if err == nil && len(rows) == 0 && len(terms) > 1 {
		rows, err = in.search(tx, q, terms, " OR ")
	}
	return rows, err
}

func (in *Inbox) search(tx *Tx, q *messages.SearchInbox, terms []string, join string) ([]InboxRow, error) {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + t + `"` // a term holds no quote: an FTS5 string
	}
	match, phrase := strings.Join(quoted, join), `"`+strings.Join(terms, " ")+`"`
	var matched int
	if err := tx.Get(&matched, `SELECT COUNT(*) FROM (SELECT 1 FROM inbox_fts WHERE inbox_fts MATCH ? LIMIT ?)`,
		match, maxRankedInbox+1); err != nil {
		return nil, fmt.Errorf("search inbox: %w", err)
	}
	if matched == 0 {
		return nil, nil
	}
	const from = ` FROM inbox_fts f JOIN inbox i ON i.seq = f.rowid
	 WHERE inbox_fts MATCH ?1 AND i.held_until IS NULL AND (?2 = '' OR i.mesh = ?2)`
	order := ` ORDER BY f.rowid IN (SELECT rowid FROM inbox_fts WHERE inbox_fts MATCH ?4) DESC, bm25(inbox_fts, 2.0, 1.0), i.seq DESC`
	args := []any{match, q.Mesh, q.Limit, phrase}
	if matched > maxRankedInbox {
		order, args = ` ORDER BY f.rowid DESC`, args[:3] // the index's order, read backwards to the limit
	}
	var rows []InboxRow
	if err := tx.Select(&rows, `SELECT `+searchColumns+from+order+` LIMIT ?3`, args...); err != nil {
		return nil, fmt.Errorf("search inbox: %w", err)
	}
	return rows, nil
}

// IndexEvery is how many received rows may wait for the search index
// before an insert catches it up: the index is filled in bulk (inbox
// migration 0009), one FTS5 segment for many rows instead of one per
// transaction, and a search catches it up first, so it misses nothing.
const IndexEvery = 1024

// IndexPending adds to the search index the rows past its mark and moves
// the mark to the last row.
func (in *Inbox) IndexPending(tx *Tx) error {
	if _, err := tx.Exec(`INSERT INTO inbox_fts (rowid, subject, body)
		 SELECT seq, subject, body FROM inbox WHERE seq > (SELECT through FROM inbox_fts_state) ORDER BY seq`); err != nil {
		return fmt.Errorf("index the inbox for search: %w", err)
	}
	if _, err := tx.Exec(`UPDATE inbox_fts_state SET through = (SELECT COALESCE(MAX(seq), 0) FROM inbox)`); err != nil {
		return fmt.Errorf("index the inbox for search: %w", err)
	}
	in.unindexed = 0
	return nil
}
