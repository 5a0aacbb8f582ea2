package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// The audit log is written by triggers (migration 0007 and later), and a
// trigger can be dropped or changed from the sqlite3 shell, after which a
// transition would go unrecorded. At every open the outbox's schema
// objects that write the log — its triggers and the audit_append view —
// are compared with what the migrations define: one missing or changed is
// created again as the migrations have it, a trigger they do not define
// is dropped, and the repair is itself the entry audit.restored, naming
// what was restored, so the gap it leaves in the log is on the record.

// auditObject is one schema object of outbox.db's audit log, as the
// migrations last define it.
type auditObject struct {
	kind, name, sql string
}

var (
	auditObjectsOnce sync.Once
	auditObjectsList []auditObject
	// createObject matches a migration's CREATE TRIGGER … END; (END at the
	// start of its line, as the migrations write it) or CREATE VIEW …;.
	createObject = regexp.MustCompile(`(?ms)^CREATE (TRIGGER) (\w+)\b.*?^END;|^CREATE (VIEW) (\w+)\b[^;]*;`)
	dropObject   = regexp.MustCompile(`(?m)^DROP (TRIGGER|VIEW) (?:IF EXISTS )?(\w+);`)
)

// auditObjects are the triggers and views outbox.db's migrations leave,
// in the order they define them (the view and the trigger every other
// one writes through first).
func auditObjects() []auditObject {
	auditObjectsOnce.Do(func() {
		files, err := fs.Glob(OutboxMigrations, "*.sql")
		if err != nil {
			panic(err) // the pattern is valid
		}
		slices.Sort(files)
		for _, f := range files {
			text, err := fs.ReadFile(OutboxMigrations, f)
			if err != nil {
				panic(err) // embedded
			}
			for _, m := range dropObject.FindAllStringSubmatch(string(text), -1) {
				auditObjectsList = slices.DeleteFunc(auditObjectsList, func(o auditObject) bool { return o.name == m[2] })
			}
			for _, m := range createObject.FindAllStringSubmatch(string(text), -1) {
				kind, name := m[1]+m[3], m[2]+m[4] // one of the two alternatives matched
				auditObjectsList = slices.DeleteFunc(auditObjectsList, func(o auditObject) bool { return o.name == name })
				auditObjectsList = append(auditObjectsList, auditObject{kind: strings.ToLower(kind), name: name, sql: strings.TrimSuffix(m[0], ";")})
			}
		}
	})
	return auditObjectsList
}

// schemaObject is a row of sqlite_master.
type schemaObject struct {
	Type string `db:"type"`
	Name string `db:"name"`
	SQL  string `db:"sql"`
}

// sameSQL compares two statements' text, white space folded.
func sameSQL(a, b string) bool {
	return strings.Join(strings.Fields(a), " ") == strings.Join(strings.Fields(b), " ")
}

// restoreAudit puts back the audit log's triggers and view as the
// migrations define them, drops any other trigger, and records what it
// changed as the entry audit.restored; it returns the names it restored
// or dropped.
func (o *Outbox) restoreAudit(ctx context.Context) ([]string, error) {
	var have []schemaObject
	if err := o.db.SelectContext(ctx, &have, `SELECT type, name, ifnull(sql, '') AS sql FROM sqlite_master WHERE type IN ('trigger', 'view')`); err != nil {
		return nil, fmt.Errorf("read the audit log's triggers: %w", err)
	}
	want := auditObjects()
	var fixes []string
	for _, h := range have {
		if h.Type == "trigger" && !slices.ContainsFunc(want, func(w auditObject) bool { return w.name == h.Name }) {
			fixes = append(fixes, "DROP TRIGGER "+h.Name)
		}
	}
	for _, w := range want {
		i := slices.IndexFunc(have, func(h schemaObject) bool { return h.Name == w.name })
		if i >= 0 && have[i].Type == w.kind && sameSQL(have[i].SQL, w.sql) {
			continue
		}
		if i >= 0 {
			fixes = append(fixes, fmt.Sprintf("DROP %s %s", strings.ToUpper(have[i].Type), w.name))
		}
		fixes = append(fixes, w.sql)
	}
	if len(fixes) == 0 {
		return nil, nil
	}
	var names []string
	tx, err := o.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // after a commit, a no-op
	for _, stmt := range fixes {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("restore the audit log's triggers: %s: %w", strings.SplitN(stmt, "\n", 2)[0], err)
		}
		if f := strings.Fields(stmt); len(f) > 2 && !slices.Contains(names, f[2]) {
			names = append(names, f[2])
		}
	}
	detail, _ := json.Marshal(map[string][]string{"objects": names}) // strings always marshal
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_append (kind, subject, detail) VALUES ('audit.restored', 'outbox.db', ?)`,
		string(detail)); err != nil {
		return nil, fmt.Errorf("record the audit log's repair: %w", err)
	}
	return names, tx.Commit()
}
