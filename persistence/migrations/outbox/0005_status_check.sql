-- The status CHECK written as comparisons instead of an IN list: SQLite
-- builds an ephemeral table for an IN list of more than two constants
-- each time it checks the constraint, that is at every insert and every
-- change of status (3 µs an insert against 1 µs: BenchmarkStatusCheck in
-- persistence/bench_test.go). The two forms accept the
-- same values, so the definition is edited in place — the procedure
-- SQLite documents for changing a CHECK constraint, without a rebuild of
-- the table (the migration runner bumps schema_version after it). A file
-- whose definition reads otherwise is left as it is.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, 'CHECK(status IN' || char(10) || '                        (''pending'',''inflight'',''done'',''dead'',''aborted''))',
                     'CHECK(status = ''pending'' OR status = ''inflight'' OR status = ''done'' OR status = ''dead'' OR status = ''aborted'')')
 WHERE type = 'table' AND name = 'outbox';
PRAGMA writable_schema = OFF;
