package broker

import "testing"

// TestRewrite: each backend's SQL for a query written once, the same from
// the kept rewrite as from the first; past maxRewritten kept queries a new
// one is still rewritten, only not kept.
func TestRewrite(t *testing.T) {
	const q = "SELECT x FROM EACH(?) JOIN delivery_queue d /*SKIP LOCKED*/ WHERE a = ? AND b = ?"
	for _, c := range []struct {
		d    *dialect
		want string
	}{
		{sqliteDialect, "SELECT x FROM json_each(?) JOIN delivery_queue d  WHERE a = ? AND b = ?"},
		{postgresDialect, "SELECT x FROM jsonb_array_elements_text(CAST($1 AS jsonb)) JOIN delivery_queue d FOR UPDATE OF d SKIP LOCKED WHERE a = $2 AND b = $3"},
	} {
		for range 2 {
			if got := c.d.rewrite(q); got != c.want {
				t.Errorf("%s: %q, want %q", c.d.name, got, c.want)
			}
		}
	}
	d := &dialect{name: "test", bind: postgresDialect.bind, replacer: postgresDialect.replacer}
	d.nRewritten.Store(maxRewritten)
	for range 2 {
		if got := d.rewrite("SELECT ?"); got != "SELECT $1" {
			t.Errorf("past the bound: %q", got)
		}
	}
	if _, kept := d.rewritten.Load("SELECT ?"); kept {
		t.Error("a query past the bound was kept")
	}
}
