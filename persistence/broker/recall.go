package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/claudemesh/claudemesh-go/messages"
)

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
	terms := messages.SearchTerms(q.Query, MaxRecallTerms)
	if len(terms) == 0 {
		return s.recallRows(ctx, meshID, s.recallSQL(recallNewest), meshID, jsonArray(tags), limit)
	}
	words, err := s.tellingTerms(ctx, meshID, terms)
	if err != nil {
		return nil, err
	}
	found, err := s.search(ctx, meshID, words, terms, tags, limit, false)
	if err == nil && len(found) == 0 && len(words) > 1 {
		found, err = s.search(ctx, meshID, words, terms, tags, limit, true)
	}
	return found, err
}

// Near-universal words: a word in more than nearUniversal of the newest
// recallSample memories (SQLite: of the store; PostgreSQL: of the mesh)
// says almost nothing about relevance (bm25 gives it no weight), yet
// matching and ranking it reads an index entry for nearly every memory.
const (
	recallSample  = 1000
	nearUniversal = recallSample / 2
)

// tellingTerms returns terms without the near-universal ones, or all of
// them when every one is. Only a store of more than nearUniversal
// memories has any.
func (s *Store) tellingTerms(ctx context.Context, meshID string, terms []string) ([]string, error) {
	var sql strings.Builder
	args := make([]any, 0, len(terms)+2)
	if s.d.name == sqliteName {
		sql.WriteString(`SELECT 0`)
		for i, t := range terms {
			fmt.Fprintf(&sql, `, (SELECT COUNT(*) FROM memory_fts WHERE memory_fts MATCH ?%d AND rowid > b.low)`, i+1)
			args = append(args, `"`+t+`"`)
		}
		sql.WriteString(` FROM (SELECT COALESCE(MAX(seq), 0) - ` + strconv.Itoa(recallSample) + ` AS low FROM memory) b`)
	} else {
		args = append(args, pgx.QueryExecModeExec, meshID)
		sql.WriteString(`SELECT 0`)
		for i, t := range terms {
			fmt.Fprintf(&sql, `, COUNT(*) FILTER (WHERE b.search @@ plainto_tsquery('english', $%d))`, i+2)
			args = append(args, t)
		}
		sql.WriteString(` FROM (SELECT search FROM memory WHERE mesh_id = $1 ORDER BY remembered_at DESC, id DESC LIMIT ` +
			strconv.Itoa(recallSample) + `) b`)
	}
	counts := make([]int, len(terms)+1)
	dest := make([]any, len(counts))
	for i := range counts {
		dest[i] = &counts[i]
	}
	if err := s.rdb.QueryRowxContext(ctx, sql.String(), args...).Scan(dest...); err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	var telling []string
	for i, t := range terms {
		if counts[i+1] <= nearUniversal {
			telling = append(telling, t)
		}
	}
	if len(telling) == 0 {
		return terms, nil
	}
	return telling, nil
}

// search runs the recall query for words: memories with every word, or
// with any when anyWord, those with terms (the whole query) as a phrase
// first. A match of more than maxRanked memories is answered newest first
// instead of by relevance: ranking costs some µs a memory, and words that
// common say little about relevance.
func (s *Store) search(ctx context.Context, meshID string, words, terms, tags []string, limit int, anyWord bool) ([]Memory, error) {
	join, phrase := " ", strings.Join(terms, " ")
	if anyWord {
		join = " or "
	}
	match := strings.Join(words, join) // for websearch_to_tsquery, which never fails: "or" is its only operator here
	var mode []any                     // on PostgreSQL, each query planned for its values
	if s.d.name == sqliteName {
		quoted := make([]string, len(words))
		for i, t := range words {
			quoted[i] = `"` + t + `"` // a term holds no quote: an FTS5 string, never an operator
		}
		join = " AND "
		if anyWord {
			join = " OR "
		}
		match, phrase = strings.Join(quoted, join), `"`+phrase+`"`
	} else {
		mode = []any{pgx.QueryExecModeExec}
	}
	var matched int
	if err := s.rdb.GetContext(ctx, &matched, s.recallSQL(recallCount), append(mode, match, meshID, maxRanked+1)...); err != nil {
		return nil, fmt.Errorf("recall: %w", err)
	}
	switch {
	case matched == 0:
		return []Memory{}, nil
	case matched > maxRanked:
		kind := recallNewestMatching
		if s.d.name == postgresName {
			// Words that common are most often met among the newest
			// memories: a bounded look there first. Had those few of
			// them, the matches are sparse: sorted from the words' index
			// rather than met reading the mesh newest first.
			found, err := s.recallRows(ctx, meshID, s.recallSQL(recallNewestRecent), append(mode, match, meshID, jsonArray(tags), limit)...)
			if err != nil || len(found) == limit {
				return found, err
			}
			if len(found)*4 < limit {
				kind = recallNewestSparse
			}
		}
		return s.recallRows(ctx, meshID, s.recallSQL(kind), append(mode, match, meshID, jsonArray(tags), limit)...)
	default:
		return s.recallRows(ctx, meshID, s.recallSQL(recallRanked), append(mode, phrase, match, meshID, jsonArray(tags), limit)...)
	}
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
	recallNewestRecent                     // PostgreSQL: recallNewestMatching among the newest recallSample
	recallNewestSparse                     // PostgreSQL: recallNewestMatching sorted, not in the index's order
)

const memoryColumns = `m.id, m.content, CAST(m.tags AS TEXT), m.remembered_by, m.remembered_by_name, m.remembered_at`

var recallQueries = map[string]map[recallKind]string{
	sqliteName: {
		recallNewest: `SELECT ` + memoryColumns + `, CAST(0 AS REAL) FROM memory m WHERE m.mesh_id = ?1 AND %s
			ORDER BY m.remembered_at DESC, m.seq DESC LIMIT ?3`,
		// The index holds every mesh: the count is the whole table's (?2
		// is unused).
		recallCount: `SELECT COUNT(*) FROM (SELECT 1 FROM memory_fts WHERE memory_fts MATCH ?1 LIMIT ?3)`,
		// Newest first is in the order remembered: the index's, read
		// backwards until the limit is met.
		recallNewestMatching: `SELECT ` + memoryColumns + `, CAST(0 AS REAL)
			  FROM memory_fts f JOIN memory m ON m.seq = f.rowid
			 WHERE memory_fts MATCH ?1 AND m.mesh_id = ?2 AND %s
			 ORDER BY f.rowid DESC LIMIT ?4`,
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
		recallNewestRecent: `SELECT ` + memoryColumns + `, CAST(0 AS REAL)
			  FROM (SELECT * FROM memory WHERE mesh_id = $2 ORDER BY remembered_at DESC, id DESC LIMIT ` + strconv.Itoa(recallSample) + `) m
			 WHERE m.search @@ websearch_to_tsquery('english', $1) AND %s
			 ORDER BY m.remembered_at DESC, m.id DESC LIMIT $4`,
		recallNewestMatching: `SELECT ` + memoryColumns + `, CAST(0 AS REAL) FROM memory m
			 WHERE m.search @@ websearch_to_tsquery('english', $1) AND m.mesh_id = $2 AND %s
			 ORDER BY m.remembered_at DESC, m.id DESC LIMIT $4`,
		// The sort key, an expression, rules out reading the mesh newest
		// first along memory_mesh_idx: the matches come from the words'.
		recallNewestSparse: `SELECT ` + memoryColumns + `, CAST(0 AS REAL) FROM memory m
			 WHERE m.search @@ websearch_to_tsquery('english', $1) AND m.mesh_id = $2 AND %s
			 ORDER BY m.remembered_at + INTERVAL '0 s' DESC, m.id DESC LIMIT $4`,
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
	tagsParam := map[recallKind]int{recallNewest: 2, recallNewestMatching: 3, recallRanked: 4, recallNewestRecent: 3,
		recallNewestSparse: 3}[kind]
	if s.d.name == sqliteName {
		return fmt.Sprintf(recallQueries[sqliteName][kind], fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM json_each(?%d) want
			WHERE NOT EXISTS (SELECT 1 FROM json_each(m.tags) have WHERE have.value = want.value))`, tagsParam))
	}
	// Among the words' matches the tags are a filter, never a second index
	// scan: jsonb_contains is @> that the tags' index does not serve.
	filter := `jsonb_contains(m.tags, CAST($%d AS jsonb))`
	if kind == recallNewest {
		filter = `m.tags @> CAST($%d AS jsonb)`
	}
	return fmt.Sprintf(recallQueries[postgresName][kind], fmt.Sprintf(filter, tagsParam))
}
