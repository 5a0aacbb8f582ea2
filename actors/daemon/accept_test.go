package daemon_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var prefixRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// TestAcceptTable is spec §4.5's lookup table, row by row, through the real
// socket: an existing row in each state, then a request with the same or a
// different fingerprint.
func TestAcceptTable(t *testing.T) {
	h := startDaemon(t)
	cases := []struct {
		state    string // "" = no existing row
		match    bool
		status   int
		conflict string
		check    func(t *testing.T, body map[string]any)
	}{
		{"", true, 202, "", wantField("status", "queued")},
		{"pending", true, 202, "", wantField("status", "queued")},
		{"pending", false, 409, "outbox_pending_fingerprint_mismatch", nil},
		{"inflight", true, 202, "", wantField("status", "inflight")},
		{"inflight", false, 409, "outbox_inflight_fingerprint_mismatch", nil},
		{"done", true, 200, "", func(t *testing.T, b map[string]any) {
			wantField("broker_message_id", "bm-1")(t, b)
			wantField("history_id", "h-1")(t, b)
			wantField("duplicate", true)(t, b)
		}},
		{"done", false, 409, "outbox_done_fingerprint_mismatch", wantField("broker_message_id", "bm-1")},
		{"dead", true, 409, "outbox_dead_fingerprint_match", wantField("reason", "payload too large")},
		{"dead", false, 409, "outbox_dead_fingerprint_mismatch", wantField("reason", "payload too large")},
		{"aborted", true, 409, "outbox_aborted_fingerprint_match", nil},
		{"aborted", false, 409, "outbox_aborted_fingerprint_mismatch", nil},
	}
	for i, c := range cases {
		name := fmt.Sprintf("%s/match=%v", c.state, c.match)
		t.Run(name, func(t *testing.T) {
			id := fmt.Sprintf("table-%d", i)
			body := fmt.Sprintf(`{"to":"@alerts","message":"hello","client_message_id":%q}`, id)
			if c.state != "" {
				if st, _ := h.post("/v1/send", body); st != 202 {
					t.Fatalf("seeding: %d", st)
				}
				h.exec(`UPDATE outbox SET status = ?, broker_message_id = 'bm-1', history_id = 'h-1',
				        last_error = 'payload too large', aborted_at = 1, aborted_by = 'operator'
				        WHERE client_message_id = ?`, c.state, id)
			}
			if !c.match {
				body = strings.Replace(body, "hello", "a different body", 1)
			}
			status, resp := h.post("/v1/send", body)
			if status != c.status {
				t.Fatalf("status %d %v, want %d", status, resp, c.status)
			}
			if resp["client_message_id"] != id {
				t.Errorf("client_message_id %v, want %s", resp["client_message_id"], id)
			}
			if c.conflict != "" {
				wantField("error", "idempotency_key_reused")(t, resp)
				wantField("conflict", c.conflict)(t, resp)
				if p, _ := resp["daemon_fingerprint_prefix"].(string); !prefixRE.MatchString(p) {
					t.Errorf("daemon_fingerprint_prefix %q", p)
				}
			}
			if c.check != nil {
				c.check(t, resp)
			}
			if n := h.rows("client_message_id = ?", id); n != 1 {
				t.Fatalf("%d rows for %s, want 1", n, id)
			}
			if c.state != "" && h.rows("client_message_id = ? AND status = ?", id, c.state) != 1 {
				t.Fatal("the answer mutated the existing row")
			}
		})
	}
}

func wantField(key string, want any) func(*testing.T, map[string]any) {
	return func(t *testing.T, body map[string]any) {
		t.Helper()
		if got := body[key]; got != want {
			t.Errorf("%s = %v, want %v (body %v)", key, got, want, body)
		}
	}
}

// TestAcceptHeaderWinsAndMints: the Idempotency-Key header names the id;
// with no id at all the daemon mints a ULID.
func TestAcceptHeaderWinsAndMints(t *testing.T) {
	h := startDaemon(t)
	status, resp := h.post("/v1/send", `{"to":"*","message":"x"}`, "Idempotency-Key", "hdr-1")
	if status != 202 || resp["client_message_id"] != "hdr-1" {
		t.Fatalf("header id: %d %v", status, resp)
	}
	status, resp = h.post("/v1/send", `{"to":"*","message":"x"}`)
	id, _ := resp["client_message_id"].(string)
	if status != 202 || !regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`).MatchString(id) {
		t.Fatalf("minted id %q (%d), want a ULID", id, status)
	}
	if h.rows("client_message_id = ?", id) != 1 {
		t.Fatal("minted id not stored")
	}
}

// TestValidationLeavesIDFree: every phase-A rejection writes nothing, and
// the same id is accepted once the request is corrected.
func TestValidationLeavesIDFree(t *testing.T) {
	h := startDaemon(t)
	big := strings.Repeat("x", 1<<20)
	cases := []struct {
		name, body string
		header     []string
		status     int
		code       string
	}{
		{"not json", `{"to":`, nil, 400, "invalid_json"},
		{"array", `[]`, nil, 400, "invalid_json"},
		{"unknown field", `{"to":"*","message":"x","prio":"now"}`, nil, 400, "unknown_field"},
		{"missing to", `{"message":"x"}`, nil, 400, "missing_to"},
		{"display name, broker away", `{"to":"alice","message":"x"}`, nil, 503, "broker_unavailable"},
		{"nothing visible", `{"to":"\u200b","message":"x"}`, nil, 400, "invalid_to"},
		{"missing message", `{"to":"*"}`, nil, 400, "missing_message"},
		{"empty message", `{"to":"*","message":""}`, nil, 400, "missing_message"},
		{"bad priority", `{"to":"*","message":"x","priority":"asap"}`, nil, 400, "invalid_priority"},
		{"meta not object", `{"to":"*","message":"x","meta":[]}`, nil, 400, "invalid_meta"},
		{"message too large", `{"to":"*","message":"` + strings.Repeat("m", 40000) + `"}`, nil, 413, "message_too_large"},
		{"body too large", `{"to":"*","message":"` + big + `"}`, nil, 413, "payload_too_large"},
		{"header differs", `{"to":"*","message":"x"}`, []string{"Idempotency-Key", "other"}, 400, "idempotency_key_mismatch"},
		{"unknown mesh", `{"to":"*","message":"x","mesh":"nope"}`, nil, 404, "mesh_not_attached"},
		{"reply ids differ", `{"to":"*","message":"x","reply_to_id":"a","replyToId":"b"}`, nil, 400, "invalid_reply_to_id"},
		{"self-DM to invalid point", `{"to":"` + strings.Repeat("0", 64) + `","message":"x"}`, nil, 400, "invalid_to"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("v-%d", i)
			body := strings.Replace(c.body, "{", fmt.Sprintf(`{"client_message_id":%q,`, id), 1)
			if c.body == `[]` || c.body == `{"to":` {
				body = c.body
			}
			status, resp := h.post("/v1/send", body, c.header...)
			if status != c.status || resp["error"] != c.code {
				t.Fatalf("got %d %v, want %d %s", status, resp, c.status, c.code)
			}
			if d, _ := resp["detail"].(string); d == "" {
				t.Error("error without detail")
			}
			if h.rows("client_message_id = ?", id) != 0 {
				t.Fatal("a rejected request wrote a row")
			}
			status, _ = h.post("/v1/send", fmt.Sprintf(`{"to":"@fixed","message":"ok","client_message_id":%q}`, id))
			if status != 202 {
				t.Fatalf("corrected request: %d, want 202 (the id must stay free)", status)
			}
		})
	}
	if n := h.rows("1=1"); n != len(cases) {
		t.Fatalf("%d rows, want %d", n, len(cases))
	}
}

// TestAcceptRace: 200 concurrent requests for one new id produce one row.
// With one body they all get 202; with two bodies racing, one body wins and
// every request with the other gets 409.
func TestAcceptRace(t *testing.T) {
	h := startDaemon(t)
	race := func(id string, bodies ...string) map[string][]int {
		statuses := make(map[string][]int)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < 200; i++ {
			body := bodies[i%len(bodies)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, _ := h.post("/v1/send", fmt.Sprintf(`{"to":"@race","message":%q,"client_message_id":%q}`, body, id))
				mu.Lock()
				statuses[body] = append(statuses[body], status)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return statuses
	}

	for _, status := range race("same", "one body")["one body"] {
		if status != 202 {
			t.Fatalf("same body: status %d, want 202 for all", status)
		}
	}
	if n := h.rows("client_message_id = 'same'"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}

	got := race("two", "body A", "body B")
	winners := 0
	for body, statuses := range got {
		all := statuses[0]
		for _, s := range statuses {
			if s != all {
				t.Fatalf("%s: mixed answers %v", body, statuses)
			}
		}
		switch all {
		case 202:
			winners++
		case 409:
		default:
			t.Fatalf("%s: status %d", body, all)
		}
	}
	if winners != 1 {
		t.Fatalf("%d bodies won, want exactly 1: %v", winners, got)
	}
	if n := h.rows("client_message_id = 'two'"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// TestDMIsSealedOnce: a DM's payload holds ciphertext, never the plaintext,
// and a retry keeps the stored bytes.
func TestDMIsSealedOnce(t *testing.T) {
	h := startDaemon(t)
	body := fmt.Sprintf(`{"to":%q,"message":"secret words","client_message_id":"dm-1"}`, h.pubkey)
	if st, _ := h.post("/v1/send", body); st != 202 {
		t.Fatal(st)
	}
	var first []byte
	if err := h.db.Get(&first, "SELECT payload FROM outbox WHERE client_message_id = 'dm-1'"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(first), "secret words") || !strings.Contains(string(first), `"targetSpec":"`+h.pubkey+`"`) {
		t.Fatalf("payload %s", first)
	}
	if st, _ := h.post("/v1/send", body); st != 202 {
		t.Fatal(st)
	}
	var second []byte
	h.db.Get(&second, "SELECT payload FROM outbox WHERE client_message_id = 'dm-1'")
	if string(first) != string(second) {
		t.Fatal("a retry changed the stored payload")
	}
}

func TestRoutesAndEnvelopes(t *testing.T) {
	h := startDaemon(t)
	if st, body := h.get("/v1/nope"); st != 404 || body["error"] != "not_found" {
		t.Fatalf("unknown path: %d %v", st, body)
	}
	resp, err := h.hc.Get("http://localhost/v1/send")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("wrong method: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	st, v := h.get("/v1/version")
	if st != 200 || v["member_pubkey"] != h.pubkey || v["mesh"] != "local" {
		t.Fatalf("version: %d %v", st, v)
	}
	h.post("/v1/send", `{"to":"*","message":"x"}`)
	st, health := h.get("/v1/health")
	meshes, _ := health["meshes"].([]any)
	if st != 200 || len(meshes) != 1 || meshes[0].(map[string]any)["queue_depth"] != float64(1) {
		t.Fatalf("health: %d %v", st, health)
	}
}
