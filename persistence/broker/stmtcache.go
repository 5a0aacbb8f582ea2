package broker

import (
	"context"
	"database/sql"
	"sync"

	"github.com/jmoiron/sqlx"
)

// maxCachedStmts bounds the statement cache. The batch statements' texts
// vary with the number of rows they carry, so the cache holds one per size
// seen, up to this many in all; beyond it, statements are parsed each time.
const maxCachedStmts = 512

// stmtCache keeps the write path's statements prepared on SQLite's writer
// connection: with the pure-Go driver, parsing is a large share of a small
// batch's cost. Inside a transaction a statement is looked up by its text;
// a miss runs unprepared and is prepared once the transaction has ended
// (the writer pool's single connection is the transaction's until then).
// PostgreSQL needs none: pgx caches statements per connection.
type stmtCache struct {
	mu     sync.Mutex
	stmts  map[string]*sqlx.Stmt
	wanted map[string]bool
}

func newStmtCache() *stmtCache {
	return &stmtCache{stmts: map[string]*sqlx.Stmt{}, wanted: map[string]bool{}}
}

// stmt returns query's cached statement bound to tx, or nil (no cache, or a
// miss, which is noted for prepareWanted).
func (s *Store) stmt(ctx context.Context, tx *sqlx.Tx, query string) *sqlx.Stmt {
	c := s.stmts
	if c == nil {
		return nil
	}
	c.mu.Lock()
	st := c.stmts[query]
	if st == nil && len(c.stmts)+len(c.wanted) < maxCachedStmts {
		c.wanted[query] = true
	}
	c.mu.Unlock()
	if st == nil {
		return nil
	}
	return tx.StmtxContext(ctx, st)
}

// prepareWanted prepares the statements that missed. It must run with no
// transaction open on the caller's side.
func (s *Store) prepareWanted(ctx context.Context) {
	c := s.stmts
	if c == nil {
		return
	}
	c.mu.Lock()
	var queries []string
	for q := range c.wanted {
		queries = append(queries, q)
	}
	clear(c.wanted)
	c.mu.Unlock()
	for _, q := range queries {
		st, err := s.db.PreparexContext(ctx, q)
		if err != nil {
			s.log.Warn("prepare statement", "err", err)
			continue
		}
		c.mu.Lock()
		if c.stmts[q] == nil {
			c.stmts[q] = st
			st = nil
		}
		c.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}

// txExec, txSelect and txQuery run query in tx through the cache.
func (s *Store) txExec(ctx context.Context, tx *sqlx.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.stmt(ctx, tx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

func (s *Store) txSelect(ctx context.Context, tx *sqlx.Tx, dest any, query string, args ...any) error {
	if st := s.stmt(ctx, tx, query); st != nil {
		return st.SelectContext(ctx, dest, args...)
	}
	return tx.SelectContext(ctx, dest, query, args...)
}

func (s *Store) txQuery(ctx context.Context, tx *sqlx.Tx, query string, args ...any) (*sqlx.Rows, error) {
	if st := s.stmt(ctx, tx, query); st != nil {
		return st.QueryxContext(ctx, args...)
	}
	return tx.QueryxContext(ctx, query, args...)
}
