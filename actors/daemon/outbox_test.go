package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestOutboxPaging: newest first, limit respected, the next page follows the
// Link header, filters apply, bad queries are 400.
func TestOutboxPaging(t *testing.T) {
	h := startDaemon(t)
	for i := 0; i < 7; i++ {
		if st, _ := h.post("/v1/send", fmt.Sprintf(`{"to":"@p","message":"m%d","client_message_id":"p-%d"}`, i, i)); st != 202 {
			t.Fatal(st)
		}
	}
	h.exec(`UPDATE outbox SET status = 'dead', last_error = 'x' WHERE client_message_id IN ('p-1', 'p-2')`)

	var seen []string
	next := "/v1/outbox?limit=3"
	for next != "" {
		resp, err := h.hc.Get("http://localhost" + next)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Items []struct {
				ClientMessageID string `json:"client_message_id"`
				To              string `json:"to"`
			} `json:"items"`
		}
		decodeJSON(t, resp, &page)
		if len(page.Items) > 3 {
			t.Fatalf("page of %d items", len(page.Items))
		}
		for _, it := range page.Items {
			if it.To != "@p" {
				t.Fatalf("to = %q", it.To)
			}
			seen = append(seen, it.ClientMessageID)
		}
		next = ""
		if link := resp.Header.Get("Link"); link != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		}
	}
	if got := strings.Join(seen, ","); got != "p-6,p-5,p-4,p-3,p-2,p-1,p-0" {
		t.Fatalf("pages gave %s", got)
	}

	st, body := h.get("/v1/outbox?status=failed")
	if items, _ := body["items"].([]any); st != 200 || len(items) != 2 {
		t.Fatalf("failed filter: %d %v", st, body)
	}
	for q, n := range map[string]int{"client_message_id=p-3": 1, "client_message_id=nosuch": 0} {
		if st, body := h.get("/v1/outbox?" + q); st != 200 || len(body["items"].([]any)) != n {
			t.Errorf("%s: %d %v, want %d row(s)", q, st, body, n)
		}
	}
	// A row by its id, however many rows are newer (the web view's
	// confirmation of a requeue or drop looks it up so).
	_, oldest := h.get("/v1/outbox?client_message_id=p-0")
	id := oldest["items"].([]any)[0].(map[string]any)["id"].(string)
	if st, body := h.get("/v1/outbox?limit=1&id=" + id); st != 200 || len(body["items"].([]any)) != 1 ||
		body["items"].([]any)[0].(map[string]any)["client_message_id"] != "p-0" {
		t.Errorf("id=%s: %d %v, want p-0's row", id, st, body)
	}
	for _, q := range []string{"status=lost", "limit=0", "limit=501", "limit=x", "before=not-a-ulid", "client_message_id=a%20b",
		"id=p-0"} {
		if st, body := h.get("/v1/outbox?" + q); st != http.StatusBadRequest || body["error"] != "invalid_query" {
			t.Errorf("%s: %d %v", q, st, body)
		}
	}
}

// TestRequeueOverHTTP covers the answers of POST /v1/outbox/requeue that
// change nothing, and one that succeeds.
func TestRequeueOverHTTP(t *testing.T) {
	h := startDaemon(t)
	h.post("/v1/send", `{"to":"@r","message":"m","client_message_id":"r-1"}`)
	h.post("/v1/send", `{"to":"@r","message":"m","client_message_id":"r-2"}`)
	var rowID string
	if err := h.db.Get(&rowID, "SELECT id FROM outbox WHERE client_message_id = 'r-1'"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{}`, 400, "missing_id"},
		{`{"id":"nope"}`, 404, "outbox_row_not_found"},
		{`{"id":"` + rowID + `","new_client_message_id":"r-2"}`, 409, "client_message_id_in_use"},
		{`{"id":"` + rowID + `","new_client_message_id":"has space"}`, 400, "invalid_client_message_id"},
		{`{"id":"` + rowID + `","patch_payload":{"to":"bob","message":"x"}}`, 400, "invalid_to"},
		{`{"id":"` + rowID + `","extra":1}`, 400, "unknown_field"},
	} {
		if st, body := h.post("/v1/outbox/requeue", c.body); st != c.status || body["error"] != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.body, st, body, c.status, c.code)
		}
	}
	if h.rows("status = 'pending'") != 2 || h.rows("1=1") != 2 {
		t.Fatal("a refused requeue changed rows")
	}
	h.exec(`UPDATE outbox SET status = 'inflight' WHERE id = ?`, rowID)
	if st, body := h.post("/v1/outbox/requeue", `{"id":"`+rowID+`"}`); st != 409 || body["error"] != "requeue_not_eligible" {
		t.Fatalf("inflight: %d %v", st, body)
	}
	h.exec(`UPDATE outbox SET status = 'dead' WHERE id = ?`, rowID)
	st, body := h.post("/v1/outbox/requeue", `{"id":"`+rowID+`","new_client_message_id":"r-1b"}`)
	if st != 200 || body["aborted_row_id"] != rowID || body["new_client_message_id"] != "r-1b" {
		t.Fatalf("requeue: %d %v", st, body)
	}
	if h.rows("id = ? AND status = 'aborted' AND aborted_by = 'operator' AND superseded_by = ?", rowID, body["new_row_id"]) != 1 {
		t.Fatal("old row not retired")
	}
	if h.rows(`client_message_id = 'r-1b' AND status = 'pending' AND request_fingerprint =
	           (SELECT request_fingerprint FROM outbox WHERE id = ?)`, rowID) != 1 {
		t.Fatal("successor row missing or fingerprint changed")
	}
}

func decodeJSON(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
