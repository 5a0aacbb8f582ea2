package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// remember stores content through c and returns the memory's id.
func remember(t *testing.T, c *client, content string, tags ...string) string {
	t.Helper()
	c.send(map[string]any{"type": "remember", "content": content, "tags": tags, "_reqId": "rm"})
	f := c.next("memory_stored")
	id, _ := f["id"].(string)
	if f["_reqId"] != "rm" || len(id) != broker.TopicIDLength {
		t.Fatalf("memory_stored = %v", f)
	}
	return id
}

// recall asks c's broker and returns the memories in order.
func recall(t *testing.T, c *client, req map[string]any) []map[string]any {
	t.Helper()
	req["type"], req["_reqId"] = "recall", "rc"
	c.send(req)
	f := c.next("memory_results")
	if f["_reqId"] != "rc" {
		t.Fatalf("memory_results = %v", f)
	}
	list, _ := f["memories"].([]any)
	out := make([]map[string]any, len(list))
	for i, m := range list {
		out[i] = m.(map[string]any)
	}
	return out
}

// TestMemoryFrames: remember, recall and forget in upstream's shapes, by
// one member and seen by another; refusals are invalid_args with nothing
// stored.
func TestMemoryFrames(t *testing.T) {
	backends(t, noLimit, func(t *testing.T, e *env) {
		alice, bob := e.member("alice"), e.member("bob")
		a, b := e.connect(alice, "a"), e.connect(bob, "b")
		partial := remember(t, a, "the test of the deploy is flaky on Mondays", "ops")
		exact := remember(t, a, "we fixed the flaky test by waiting for the server", "ci", "ops")

		got := recall(t, b, map[string]any{"query": "flaky test"})
		if len(got) != 2 || got[0]["id"] != exact || got[1]["id"] != partial {
			t.Fatalf("recall = %v; want the exact phrase, then the partial match", got)
		}
		m := got[0]
		if m["content"] != "we fixed the flaky test by waiting for the server" || m["rememberedBy"] != alice.id.PublicKeyHex() ||
			m["rememberedByName"] != "alice" || m["rememberedAt"] == "" || m["score"].(float64) <= 0 ||
			len(m["tags"].([]any)) != 2 {
			t.Errorf("first memory = %v", m)
		}
		if got := recall(t, b, map[string]any{"query": "flaky", "tags": []string{"ci"}}); len(got) != 1 || got[0]["id"] != exact {
			t.Errorf("recall with tag ci = %v", got)
		}
		if got := recall(t, b, map[string]any{"query": "flaky", "limit": 1}); len(got) != 1 {
			t.Errorf("recall with limit 1 = %v", got)
		}
		if got := recall(t, b, map[string]any{"query": `"; DROP TABLE memory; -- NEAR( *`}); len(got) != 0 {
			t.Errorf("recall of syntax = %v, want nothing", got)
		}

		for i := range 2 { // forget is idempotent: the same ack twice
			b.send(map[string]any{"type": "forget", "memoryId": exact, "_reqId": "fg"})
			if f := b.next("ack"); f["id"] != exact || f["messageId"] != exact || f["queued"] != false || f["_reqId"] != "fg" {
				t.Errorf("forget #%d ack = %v", i+1, f)
			}
		}
		if got := recall(t, a, map[string]any{"query": "flaky test"}); len(got) != 1 || got[0]["id"] != partial {
			t.Errorf("recall after forget = %v", got)
		}

		for _, c := range []struct {
			req  map[string]any
			code string
		}{
			{map[string]any{"type": "remember", "content": strings.Repeat("x", broker.MaxMemoryBytes+1), "_reqId": "bad"}, codeInvalidArgs},
			{map[string]any{"type": "remember", "content": "", "_reqId": "bad"}, codeInvalidArgs},
			{map[string]any{"type": "remember", "content": "ok", "tags": []string{""}, "_reqId": "bad"}, codeInvalidArgs},
			{map[string]any{"type": "recall", "query": strings.Repeat("q", broker.MaxRecallQueryBytes+1), "_reqId": "bad"}, codeInvalidArgs},
			{map[string]any{"type": "forget", "_reqId": "bad"}, codeInvalidArgs},
			{map[string]any{"type": "forget", "memoryId": strings.Repeat("m", 10_000), "_reqId": "bad"}, codeInvalidArgs},
			{map[string]any{"type": "forget", "memoryId": "../../../../etc/passwd", "_reqId": "bad"}, codeInvalidArgs},
			{map[string]any{"type": "forget", "memoryId": partial[:31] + "%", "_reqId": "bad"}, codeInvalidArgs},
		} {
			a.send(c.req)
			if f := a.next("error"); f["code"] != c.code || f["_reqId"] != "bad" || f["id"] != "bad" {
				t.Errorf("%s %.40v: %v, want %s", c.req["type"], c.req, f, c.code)
			}
		}
		a.send(map[string]any{"type": "remember", "content": 42, "_reqId": "typed"})
		if f := a.next("error"); f["code"] == nil || f["code"] == codeInternal {
			t.Errorf("remember with a number for content: %v", f)
		}
		left, err := e.store.Recall(context.Background(), e.mesh.ID, broker.RecallQuery{})
		if err != nil || len(left) != 1 || left[0].ID != partial {
			t.Errorf("stored after the refusals: %v, %v; want the one memory", left, err)
		}
	})
}
