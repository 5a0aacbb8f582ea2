package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// recallIDs recalls q in the mesh and returns the ids in order.
func (e *env) recallIDs(t testing.TB, meshID string, q RecallQuery) []string {
	t.Helper()
	got, err := e.s.Recall(context.Background(), meshID, q)
	if err != nil {
		t.Fatalf("Recall(%+v): %v", q, err)
	}
	ids := make([]string, len(got))
	for i, m := range got {
		ids[i] = m.ID
	}
	return ids
}

func (e *env) remember(t testing.TB, meshID, content string, tags ...string) *Memory {
	t.Helper()
	m, err := e.s.Remember(context.Background(), meshID, NewMemory{Content: content, Tags: tags, Pubkey: strings.Repeat("a", 64), Name: "alice"})
	if err != nil {
		t.Fatalf("Remember(%q): %v", content, err)
	}
	return m
}

func TestRecallRanking(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m, other := e.mesh(t, Mesh{}), e.mesh(t, Mesh{})
		partial := e.remember(t, m.ID, "The test of the deploy script is flaky on Mondays; nobody knows why.", "ops")
		exact := e.remember(t, m.ID, "How we fixed the flaky test: the fixture raced the server start.", "ci", "ops")
		e.remember(t, m.ID, "Lunch is at noon.")
		e.remember(t, other.ID, "the flaky test of the other mesh")

		got, err := e.s.Recall(context.Background(), m.ID, RecallQuery{Query: "flaky test"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != exact.ID || got[1].ID != partial.ID {
			t.Fatalf("recall flaky test = %+v; want the exact phrase, then the partial match, and nothing of the other mesh", got)
		}
		first := got[0]
		if first.Content != exact.Content || !slices.Equal(first.Tags, []string{"ci", "ops"}) || first.RememberedByName != "alice" ||
			first.RememberedBy != strings.Repeat("a", 64) || !first.RememberedAt.Equal(e.clock.Now().Truncate(time.Millisecond)) ||
			first.Score <= 0 {
			t.Errorf("first result = %+v", first)
		}
		// No memory has both words: the memories with either.
		if ids := e.recallIDs(t, m.ID, RecallQuery{Query: "lunch fixture"}); len(ids) != 2 || slices.Contains(ids, partial.ID) {
			t.Errorf("recall lunch fixture = %v, want the two memories with either word", ids)
		}
		// Stemming: "fixing" finds "fixed".
		if ids := e.recallIDs(t, m.ID, RecallQuery{Query: "FIXING"}); !slices.Equal(ids, []string{exact.ID}) {
			t.Errorf("recall FIXING = %v, want [%s]", ids, exact.ID)
		}
		if ids := e.recallIDs(t, m.ID, RecallQuery{Query: "flaky", Limit: 1}); len(ids) != 1 {
			t.Errorf("limit 1 gave %d results", len(ids))
		}
	})
}

func TestRecallTags(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		both := e.remember(t, m.ID, "release branch is frozen", "release", "ops")
		rel := e.remember(t, m.ID, "release notes go in CHANGES", "release")
		e.clock.Advance(time.Second)
		newest := e.remember(t, m.ID, "ops rota is on the wiki", "ops")
		for _, c := range []struct {
			q    RecallQuery
			want []string
		}{
			{RecallQuery{Query: "release", Tags: []string{"release"}}, []string{both.ID, rel.ID}},
			{RecallQuery{Query: "release", Tags: []string{"release", "ops"}}, []string{both.ID}},
			{RecallQuery{Query: "release", Tags: []string{"nope"}}, []string{}},
			{RecallQuery{Tags: []string{"ops"}}, []string{newest.ID, both.ID}}, // no words: newest first
		} {
			got := e.recallIDs(t, m.ID, c.q)
			if c.q.Query == "release" && len(c.want) == 2 {
				slices.Sort(got)
				slices.Sort(c.want)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("Recall(%+v) = %v, want %v", c.q, got, c.want)
			}
		}
	})
}

func TestForget(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m, other := e.mesh(t, Mesh{}), e.mesh(t, Mesh{})
		gone := e.remember(t, m.ID, "the staging password rotates weekly")
		kept := e.remember(t, m.ID, "the staging host is build-3")
		if found, err := e.s.Forget(ctx, other.ID, gone.ID); err != nil || found {
			t.Fatalf("Forget from another mesh = %v, %v; want nothing found", found, err)
		}
		for i, want := range []bool{true, false} { // the second forget is a no-op
			if found, err := e.s.Forget(ctx, m.ID, gone.ID); err != nil || found != want {
				t.Fatalf("Forget #%d = %v, %v; want %v", i+1, found, err, want)
			}
		}
		for _, c := range []struct {
			q    RecallQuery
			want []string
		}{{RecallQuery{Query: "staging"}, []string{kept.ID}}, {RecallQuery{Query: "password rotates"}, []string{}}, {RecallQuery{}, []string{kept.ID}}} {
			if ids := e.recallIDs(t, m.ID, c.q); !slices.Equal(ids, c.want) {
				t.Errorf("Recall(%+v) after forget = %v, want %v", c.q, ids, c.want)
			}
		}
		if n := e.count(t, "memory WHERE id = ?", gone.ID); n != 0 {
			t.Errorf("%d rows of the forgotten memory", n)
		}
		for _, bad := range []string{"", strings.Repeat("k", 10_000), "../" + kept.ID[3:], kept.ID[:31], kept.ID + "x", kept.ID[:31] + "\x00"} {
			if found, err := e.s.Forget(ctx, m.ID, bad); !errors.Is(err, ErrInvalid) || found {
				t.Errorf("Forget(%.40q) = %v, %v; want ErrInvalid", bad, found, err)
			}
		}
	})
}

// TestRecallSyntaxIsText: quotes, operators and SQL in a query are text:
// never an error, never a match the words do not make.
func TestRecallSyntaxIsText(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		drop := e.remember(t, m.ID, "never DROP TABLE in production")
		e.remember(t, m.ID, "an unrelated note about lunch")
		for _, q := range []string{`"`, `""`, `'`, `OR`, `a OR b`, `*`, `drop*`, `NEAR(drop table)`, `'; DROP TABLE memory; --`,
			`-x`, `drop -table`, `"drop" AND "table"`, `content:drop`, `^drop`, `(`, `)`, `\`, `%`, `_`, `!!`, `&|`, `<->`,
			`$1`, `?`, `:x`, "nul\x00byte", "\xff\xfe", `drop NOT table`} {
			got, err := e.s.Recall(context.Background(), m.ID, RecallQuery{Query: q})
			if err != nil {
				t.Errorf("Recall(%q): %v", q, err)
				continue
			}
			for _, r := range got {
				if r.ID != drop.ID && len(messages.SearchTerms(q, MaxRecallTerms)) > 0 {
					t.Errorf("Recall(%q) matched %q", q, r.Content)
				}
			}
		}
		if ids := e.recallIDs(t, m.ID, RecallQuery{Query: `'; DROP TABLE memory; --`}); !slices.Equal(ids, []string{drop.ID}) {
			t.Errorf("the SQL as words found %v, want [%s]", ids, drop.ID)
		}
		if n := e.count(t, "memory WHERE mesh_id = ?", m.ID); n != 2 {
			t.Errorf("%d memories after the queries, want 2", n)
		}
	})
}

func TestRememberRefusals(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		m := e.mesh(t, Mesh{})
		for _, c := range []struct {
			name string
			mem  NewMemory
		}{
			{"empty", NewMemory{Content: ""}},
			{"blank", NewMemory{Content: " \n\t"}},
			{"oversized", NewMemory{Content: strings.Repeat("x", MaxMemoryBytes+1)}},
			{"not UTF-8", NewMemory{Content: "bad \xff byte"}},
			{"empty tag", NewMemory{Content: "ok", Tags: []string{""}}},
			{"long tag", NewMemory{Content: "ok", Tags: []string{strings.Repeat("t", MaxMemoryTagBytes+1)}}},
			{"control tag", NewMemory{Content: "ok", Tags: []string{"a\nb"}}},
			{"too many tags", NewMemory{Content: "ok", Tags: strings.Split(strings.Repeat("t,", MaxMemoryTags)+"last", ",")}},
		} {
			if _, err := e.s.Remember(ctx, m.ID, c.mem); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: Remember = %v, want ErrInvalid", c.name, err)
			}
		}
		if _, err := e.s.Recall(ctx, m.ID, RecallQuery{Query: strings.Repeat("q", MaxRecallQueryBytes+1)}); !errors.Is(err, ErrInvalid) {
			t.Errorf("oversized query: %v, want ErrInvalid", err)
		}
		if n := e.count(t, "memory"); n != 0 {
			t.Errorf("%d memories stored by refused requests", n)
		}
		// At the cap it is stored, and duplicate tags are kept once.
		max, err := e.s.Remember(ctx, m.ID, NewMemory{Content: strings.Repeat("y", MaxMemoryBytes), Tags: []string{"a", "a"}})
		if err != nil || !slices.Equal(max.Tags, []string{"a"}) {
			t.Errorf("Remember at the cap = %+v, %v", max, err)
		}
	})
}

// FuzzRecall: no query, however malformed, makes recall fail on SQLite
// (FTS5's query syntax is the risk), and a query's results only ever hold
// memories of the mesh.
func FuzzRecall(f *testing.F) {
	for _, s := range []string{"flaky test", `"`, `NEAR(a b)`, `a OR b`, `*`, `-x`, `'; DROP TABLE memory; --`, "\xff", "^a", "a:b"} {
		f.Add(s)
	}
	e := openEnv(f, Options{Dir: f.TempDir()})
	m, other := e.mesh(f, Mesh{}), e.mesh(f, Mesh{})
	e.remember(f, m.ID, "a flaky test near the table, with OR and AND and NOT")
	e.remember(f, other.ID, "another mesh's flaky test")
	f.Fuzz(func(t *testing.T, q string) {
		if len(q) > MaxRecallQueryBytes {
			return
		}
		got, err := e.s.Recall(context.Background(), m.ID, RecallQuery{Query: q})
		if err != nil {
			t.Fatalf("Recall(%q): %v", q, err)
		}
		for _, r := range got {
			if strings.Contains(r.Content, "another") {
				t.Fatalf("Recall(%q) returned %+v", q, r)
			}
		}
	})
}

// TestRecallBeyondRankBound: a query matching more than maxRanked
// memories answers the newest of them, the tags still filtering.
func TestRecallBeyondRankBound(t *testing.T) {
	old := maxRanked
	maxRanked = 2
	t.Cleanup(func() { maxRanked = old })
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		var ids []string
		for i, tag := range []string{"a", "b", "a", "b"} {
			e.clock.Advance(time.Second)
			ids = append(ids, e.remember(t, m.ID, strings.Repeat("deploy ", i+1)+"notes", tag).ID)
		}
		got, err := e.s.Recall(context.Background(), m.ID, RecallQuery{Query: "deploy", Limit: 3})
		if err != nil || len(got) != 3 || got[0].ID != ids[3] || got[1].ID != ids[2] || got[2].ID != ids[1] || got[0].Score != 0 {
			t.Fatalf("recall of 4 matches over a bound of 2 = %+v, %v; want the 3 newest, unscored", got, err)
		}
		if ids2 := e.recallIDs(t, m.ID, RecallQuery{Query: "deploy", Tags: []string{"a"}}); !slices.Equal(ids2, []string{ids[2], ids[0]}) {
			t.Errorf("with tag a = %v, want [%s %s]", ids2, ids[2], ids[0])
		}
		if ids2 := e.recallIDs(t, m.ID, RecallQuery{Query: "notes deploy"}); len(ids2) != 4 {
			t.Errorf("recall notes deploy = %v", ids2)
		}
	})
}

// TestRecallLeavesOutNearUniversalWords: a word in more than half of the
// newest memories neither narrows the match nor ranks it, but stays in
// the phrase ranked first; a query of such words only still matches them
// all.
func TestRecallLeavesOutNearUniversalWords(t *testing.T) {
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		fillMemories(t, e, m.ID, nearUniversal+100, func(i int) string { return fmt.Sprintf("ci job %d passed", i) })
		without := e.remember(t, m.ID, "failed build on arm")
		phrase := e.remember(t, m.ID, "ci build failed again")
		if ids := e.recallIDs(t, m.ID, RecallQuery{Query: "CI build failed"}); !slices.Equal(ids, []string{phrase.ID, without.ID}) {
			t.Errorf("recall CI build failed = %v, want the phrase %s then %s, which lacks ci", ids, phrase.ID, without.ID)
		}
		got, err := e.s.Recall(context.Background(), m.ID, RecallQuery{Query: "passed ci"})
		if err != nil || len(got) != DefaultRecallLimit {
			t.Fatalf("recall passed ci = %d memories, %v; want %d", len(got), err, DefaultRecallLimit)
		}
		for _, r := range got {
			if !strings.HasPrefix(r.Content, "ci job ") {
				t.Errorf("recall passed ci found %q, which lacks passed", r.Content)
			}
		}
	})
}

// TestRecallNewestBeyondTheRecent: matches over the rank bound answer the
// newest first, found among the newest memories or further back, whether
// the newest hold a few of them (PostgreSQL reads the mesh newest first)
// or too few (sorted from the words' index).
func TestRecallNewestBeyondTheRecent(t *testing.T) {
	old := maxRanked
	maxRanked = 2
	t.Cleanup(func() { maxRanked = old })
	backends(t, func(t *testing.T, e *env) {
		m := e.mesh(t, Mesh{})
		var want []string // newest first
		for range 5 {
			e.clock.Advance(time.Second)
			want = append([]string{e.remember(t, m.ID, "deploy notes").ID}, want...)
		}
		e.clock.Advance(time.Second)
		fillMemories(t, e, m.ID, recallSample-2, func(i int) string { return fmt.Sprintf("lunch %d", i) })
		for range 2 {
			e.clock.Advance(time.Second)
			want = append([]string{e.remember(t, m.ID, "deploy notes again").ID}, want...)
		}
		for _, limit := range []int{4, 20} { // the newest 1,000 hold 2: a few of 4, too few of 20
			if ids := e.recallIDs(t, m.ID, RecallQuery{Query: "deploy", Limit: limit}); !slices.Equal(ids, want[:min(limit, len(want))]) {
				t.Errorf("recall deploy, limit %d = %v, want %v", limit, ids, want[:min(limit, len(want))])
			}
		}
	})
}
