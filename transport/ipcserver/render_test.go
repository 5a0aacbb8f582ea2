package ipcserver

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
)

// encodeJSON is v as writeJSON's encoder renders it.
func encodeJSON(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRenderAcceptAsEncoded: the hand-built 202 is the encoded
// messages.SendAccepted, with the headers writeJSON sets, a busy
// recipient's fields included.
func TestRenderAcceptAsEncoded(t *testing.T) {
	for _, c := range []struct {
		outcome messages.AcceptOutcome
		status  string
	}{{messages.AcceptQueued, "queued"}, {messages.AcceptInflight, "inflight"}} {
		for _, id := range []string{"build-42-done", `q"uo\te`, "01J0000000000000000000000A"} {
			w := httptest.NewRecorder()
			renderAccept(w, &messages.AcceptSend{ClientMessageID: id}, &messages.AcceptResult{Outcome: c.outcome}, "", false)
			want := encodeJSON(t, &messages.SendAccepted{ClientMessageID: id, Status: c.status})
			if w.Code != 202 || !bytes.Equal(w.Body.Bytes(), want) || w.Header().Get("Content-Type") != "application/json" ||
				w.Header().Get("Content-Length") != strconv.Itoa(len(want)) {
				t.Errorf("%s %q: %d %q %v; want 202 %q", c.status, id, w.Code, w.Body.Bytes(), w.Header(), want)
			}
		}
	}
	for _, busy := range []messages.SendAccepted{{RecipientStatus: "working", HeldUntilIdle: true}, {RecipientStatus: "dnd"}} {
		w := httptest.NewRecorder()
		renderAccept(w, &messages.AcceptSend{ClientMessageID: "busy"}, &messages.AcceptResult{Outcome: messages.AcceptQueued},
			busy.RecipientStatus, busy.HeldUntilIdle)
		busy.ClientMessageID, busy.Status = "busy", "queued"
		if want := encodeJSON(t, &busy); !bytes.Equal(w.Body.Bytes(), want) {
			t.Errorf("to a busy recipient: %q, want %q", w.Body.Bytes(), want)
		}
	}
}
