package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Memory limits.
const (
	// MaxMemoryBytes bounds a memory's content.
	MaxMemoryBytes = 64 << 10
	// MaxMemoryTags bounds the tags of a memory (and of a recall's filter);
	// MaxMemoryTagBytes bounds each.
	MaxMemoryTags     = 16
	MaxMemoryTagBytes = 64
	// MaxRecallQueryBytes bounds a recall's query; only its first
	// MaxRecallTerms words are searched.
	MaxRecallQueryBytes = 1024
	MaxRecallTerms      = 32
	// DefaultRecallLimit and MaxRecallLimit bound a recall's results.
	DefaultRecallLimit = 20
	MaxRecallLimit     = 100
)

// Memory is one memory of a mesh.
type Memory struct {
	ID               string
	MeshID           string
	Content          string
	Tags             []string
	RememberedBy     string // the member's pubkey
	RememberedByName string // its display name when it remembered
	RememberedAt     time.Time
	// Score is a recall's relevance (higher is better; 0 for a recall with
	// no words, which lists the newest). Results with the query's words
	// as an exact phrase come first, then by Score.
	Score float64
}

// NewMemory is what remember asks to store.
type NewMemory struct {
	Content string
	Tags    []string
	Pubkey  string // who remembers it
	Name    string // its display name
}

// RecallQuery is what recall asks for: memories with every word of Query
// (with any of them when none has all), ranked by relevance (the words as
// an exact phrase first), carrying every tag of Tags. A query with no
// words lists the newest memories with the tags. Query is text: quotes,
// operators and SQL in it are words or separators, never syntax.
type RecallQuery struct {
	Query string
	Tags  []string
	Limit int // 0: DefaultRecallLimit; more than MaxRecallLimit: the maximum
}

// validTags checks tags and returns them without duplicates, in order.
func validTags(tags []string) ([]string, error) {
	if len(tags) > MaxMemoryTags {
		return nil, fmt.Errorf("%w: at most %d tags, got %d", ErrInvalid, MaxMemoryTags, len(tags))
	}
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if t == "" || len(t) > MaxMemoryTagBytes || !utf8.ValidString(t) || strings.IndexFunc(t, unicode.IsControl) >= 0 {
			return nil, fmt.Errorf("%w: a tag is 1-%d bytes of UTF-8 text without control characters, got %q",
				ErrInvalid, MaxMemoryTagBytes, t)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Remember stores a memory of the mesh and returns it. Content empty,
// over MaxMemoryBytes or not UTF-8, and bad tags, wrap ErrInvalid and
// store nothing.
func (s *Store) Remember(ctx context.Context, meshID string, m NewMemory) (*Memory, error) {
	switch {
	case strings.TrimSpace(m.Content) == "":
		return nil, fmt.Errorf("%w: a memory's content is empty", ErrInvalid)
	case len(m.Content) > MaxMemoryBytes:
		return nil, fmt.Errorf("%w: a memory is at most %d bytes, this one is %d: store a summary, or split it",
			ErrInvalid, MaxMemoryBytes, len(m.Content))
	case !utf8.ValidString(m.Content):
		return nil, fmt.Errorf("%w: a memory's content must be UTF-8 text", ErrInvalid)
	}
	tags, err := validTags(m.Tags)
	if err != nil {
		return nil, err
	}
	out := &Memory{ID: newTopicID(), MeshID: meshID, Content: m.Content, Tags: tags, RememberedBy: m.Pubkey,
		RememberedByName: m.Name, RememberedAt: s.clock()}
	if _, err := s.db.ExecContext(ctx, s.d.rewrite(`INSERT INTO memory (id, mesh_id, content, tags, remembered_by,
		remembered_by_name, remembered_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		out.ID, meshID, out.Content, jsonArray(tags), out.RememberedBy, out.RememberedByName, s.d.time(out.RememberedAt)); err != nil {
		return nil, fmt.Errorf("remember: %w", err)
	}
	return out, nil
}

// Forget deletes the memory of the mesh with id for good and reports
// whether there was one; forgetting it again is a no-op.
func (s *Store) Forget(ctx context.Context, meshID, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.d.rewrite(`DELETE FROM memory WHERE mesh_id = ? AND id = ?`), meshID, id)
	if err != nil {
		return false, fmt.Errorf("forget: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// recallTerms splits a query into its words (runs of letters, digits and
// marks, lowercased), at most MaxRecallTerms of them, each once: all a
// search is made of, so that nothing else in a query can be syntax.
func recallTerms(query string) []string {
	var terms []string
	for _, w := range strings.FieldsFunc(query, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	}) {
		w = strings.ToLower(w)
		if !slices.Contains(terms, w) {
			terms = append(terms, w)
		}
		if len(terms) == MaxRecallTerms {
			break
		}
	}
	return terms
}

// Recall searches the mesh's memories. A query over MaxRecallQueryBytes
// or bad tags wrap ErrInvalid.
func (s *Store) Recall(ctx context.Context, meshID string, q RecallQuery) ([]Memory, error) {
	if len(q.Query) > MaxRecallQueryBytes {
		return nil, fmt.Errorf("%w: a recall query is at most %d bytes, got %d", ErrInvalid, MaxRecallQueryBytes, len(q.Query))
	}
	tags, err := validTags(q.Tags)
	if err != nil {
		return nil, err
	}
	limit := q.Limit
	switch {
	case limit <= 0:
		limit = DefaultRecallLimit
	case limit > MaxRecallLimit:
		limit = MaxRecallLimit
	}
	terms := recallTerms(q.Query)
	found, err := s.search(ctx, meshID, terms, tags, limit, false)
	if err == nil && len(found) == 0 && len(terms) > 1 {
		found, err = s.search(ctx, meshID, terms, tags, limit, true)
	}
	return found, err
}

// search runs the recall query for terms: memories with every term, or
// with any when anyTerm. A match of more than maxRanked memories is
// answered newest first instead of by relevance: ranking costs some µs a
// memory, and words that common say little about relevance.
func (s *Store) search(ctx context.Context, meshID string, terms, tags []string, limit int, anyTerm bool) ([]Memory, error) {
	if len(terms) == 0 {
		return s.recallRows(ctx, meshID, s.recallSQL(recallNewest), meshID, jsonArray(tags), limit)
	}
	join, phrase := " ", strings.Join(terms, " ")
	if anyTerm {
		join = " or "
	}
	words := strings.Join(terms, join) // for websearch_to_tsquery, which never fails: "or" is its only operator here
	if s.d.name == sqliteName {
		quoted := make([]string, len(terms))
		for i, t := range terms {
			quoted[i] = `"` + t + `"` // a term holds no quote: an FTS5 string, never an operator
		}
		join = " AND "
		if anyTerm {
			join = " OR "
		}
		words, phrase = strings.Join(quoted, join), `"`+phrase+`"`
	}
	var matched int
	if err := s.rdb.GetContext(ctx, &matched, s.recallSQL(recallCount), words, meshID, maxRanked+1); err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	if matched > maxRanked {
		return s.recallRows(ctx, meshID, s.recallSQL(recallNewestMatching), words, meshID, jsonArray(tags), limit)
	}
	return s.recallRows(ctx, meshID, s.recallSQL(recallRanked), phrase, words, meshID, jsonArray(tags), limit)
}

// recallRows runs a recall query and reads its memories.
func (s *Store) recallRows(ctx context.Context, meshID, query string, args ...any) ([]Memory, error) {
	rows, err := s.rdb.QueryxContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	defer rows.Close()
	out := []Memory{}
	for rows.Next() {
		m, tagsJSON := Memory{MeshID: meshID}, ""
		if err := rows.Scan(&m.ID, &m.Content, &tagsJSON, &m.RememberedBy, &m.RememberedByName,
			(*dbTime)(&m.RememberedAt), &m.Score); err != nil {
			return nil, fmt.Errorf("recall: %w", err)
		}
		if err := json.Unmarshal([]byte(tagsJSON), &m.Tags); err != nil {
			return nil, fmt.Errorf("recall: tags of memory %s: %w", m.ID, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	return out, nil
}

// maxRanked bounds the memories a recall ranks by relevance.
var maxRanked = 2000

// The recall queries, by kind: each backend's text, memoryColumns then the
// score, with %s for the tags filter (every tag of a JSON array).
type recallKind int

const (
	recallNewest         recallKind = iota // no words: (mesh, tags, limit)
	recallCount                            // how many match, up to a bound: (words, mesh, bound)
	recallNewestMatching                   // (words, mesh, tags, limit)
	recallRanked                           // (phrase, words, mesh, tags, limit)
)

const memoryColumns = `m.id, m.content, CAST(m.tags AS TEXT), m.remembered_by, m.remembered_by_name, m.remembered_at`

var recallQueries = map[string]map[recallKind]string{
	sqliteName: {
		recallNewest: `SELECT ` + memoryColumns + `, CAST(0 AS REAL) FROM memory m WHERE m.mesh_id = ?1 AND %s
			ORDER BY m.remembered_at DESC, m.seq DESC LIMIT ?3`,
		// The index holds every mesh: the count is the whole table's (?2
		// is unused).
		recallCount: `SELECT COUNT(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ?1 LIMIT ?3)`,
		recallNewestMatching: `SELECT ` + memoryColumns + `, CAST(0 AS REAL) FROM memory m
			 WHERE m.seq IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?1) AND m.mesh_id = ?2 AND %s
			 ORDER BY m.remembered_at DESC, m.seq DESC LIMIT ?4`,
		// bm25 is lower for a better match. The phrase is matched once,
		// as a set of rowids.
		recallRanked: `SELECT ` + memoryColumns + `, -bm25(memory_fts)
			  FROM memory_fts f JOIN memory m ON m.seq = f.rowid
			 WHERE memory_fts MATCH ?2 AND m.mesh_id = ?3 AND %s
			 ORDER BY f.rowid IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?1) DESC, bm25(memory_fts), m.id
			 LIMIT ?5`,
	},
	postgresName: {
		recallNewest: `SELECT ` + memoryColumns + `, CAST(0 AS REAL) FROM memory m WHERE m.mesh_id = $1 AND %s
			ORDER BY m.remembered_at DESC, m.id DESC LIMIT $3`,
		recallCount: `SELECT COUNT(*) FROM (SELECT 1 FROM memory m
			 WHERE m.search @@ websearch_to_tsquery('english', $1) AND m.mesh_id = $2 LIMIT $3) x`,
		recallNewestMatching: `SELECT ` + memoryColumns + `, CAST(0 AS REAL) FROM memory m
			 WHERE m.search @@ websearch_to_tsquery('english', $1) AND m.mesh_id = $2 AND %s
			 ORDER BY m.remembered_at DESC, m.id DESC LIMIT $4`,
		recallRanked: `SELECT ` + memoryColumns + `, ts_rank(m.search, q.words)
			  FROM memory m, (SELECT websearch_to_tsquery('english', $2) AS words, phraseto_tsquery('english', $1) AS phrase) q
			 WHERE m.search @@ q.words AND m.mesh_id = $3 AND %s
			 ORDER BY m.search @@ q.phrase DESC, ts_rank(m.search, q.words) DESC, m.id
			 LIMIT $5`,
	},
}

// recallSQL is the backend's query of kind, with its tags filter on the
// parameter before the limit.
func (s *Store) recallSQL(kind recallKind) string {
	if kind == recallCount {
		return recallQueries[s.d.name][kind]
	}
	tagsParam := map[recallKind]int{recallNewest: 2, recallNewestMatching: 3, recallRanked: 4}[kind]
	if s.d.name == sqliteName {
		return fmt.Sprintf(recallQueries[sqliteName][kind], fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM json_each(?%d) want
			WHERE NOT EXISTS (SELECT 1 FROM json_each(m.tags) have WHERE have.value = want.value))`, tagsParam))
	}
	return fmt.Sprintf(recallQueries[postgresName][kind], fmt.Sprintf(`m.tags @> CAST($%d AS jsonb)`, tagsParam))
}
