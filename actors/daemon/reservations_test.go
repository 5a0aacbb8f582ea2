package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestSessionReservations, on a daemon with its embedded broker: a
// session's exclusive reservation outlives its TTL while the session lives
// (the daemon renews it); another session waiting for an overlapping one
// gets it, under a greater fence token, as soon as the holder's session
// ends (its reservations released); bad input on every route is refused
// with its code and reserves nothing.
func TestSessionReservations(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	defer d.Close()
	ctx := context.Background()
	c := ipc.NewClient(paths.Socket())
	tokA, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	tokB, _ := register(t, c, "sess-b", "beta", os.Getpid())
	a, b := c.AsSession(tokA), c.AsSession(tokB)
	waitLinked(t, a, b)

	got, err := a.Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"src/**", "Makefile"}, TTLMs: 1000})
	if err != nil || !got.Granted || got.FenceToken < 1 || got.Mesh != "local" || len(got.Reservations) != 2 {
		t.Fatalf("reserve = %+v, %v", got, err)
	}
	other, err := b.Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"src/app.py"}, TTLMs: 1000, WaitMs: 3000})
	if err != nil || other.Granted || len(other.Conflicts) != 1 || other.Conflicts[0].HolderName != "alpha" {
		t.Fatalf("after three TTLs = %+v, %v; want refused by alpha's src/** (renewed)", other, err)
	}
	waited := make(chan *messages.Reserved, 1)
	go func() {
		got, err := b.Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"src/app.py"}, WaitMs: 20000})
		if err != nil {
			t.Error(err)
		}
		waited <- got
	}()
	if _, err := c.DeregisterSession(ctx, tokA); err != nil {
		t.Fatal(err)
	}
	if w := <-waited; w == nil || !w.Granted || w.FenceToken <= got.FenceToken {
		t.Fatalf("the waiter after alpha ended = %+v", w)
	}

	many := make([]string, messages.MaxCheckPaths+1)
	for i := range many {
		many[i] = "f"
	}
	for _, bad := range []struct {
		path, body, code string
	}{
		{"/v1/reservations", `{"repo":"","patterns":["a"]}`, messages.CodeInvalidReservationRepo},
		{"/v1/reservations", `{"repo":"r","patterns":[]}`, messages.CodeTooManyPatterns},
		{"/v1/reservations", `{"repo":"r","patterns":["a//b"]}`, messages.CodeInvalidPattern},
		{"/v1/reservations", `{"repo":"r","patterns":["!a"]}`, messages.CodeInvalidPattern},
		{"/v1/reservations", `{"repo":"r","patterns":["a"],"ttl_ms":5}`, messages.CodeInvalidReservationTTL},
		{"/v1/reservations", `{"repo":"r","patterns":["a"],"wait_ms":-1}`, messages.CodeInvalidLockWait},
		{"/v1/reservations", `{"repo":"r","patterns":["a"],"exclusiv":true}`, "unknown_field"},
		{"/v1/reservations/release", `{"repo":"r","patterns":["[a"]}`, messages.CodeInvalidPattern},
		{"/v1/reservations/release", `{"patterns":["a"]}`, messages.CodeInvalidReservationRepo},
		{"/v1/reservations/check", `{"repo":"r","paths":["../x"]}`, messages.CodeInvalidPath},
		{"/v1/reservations/check", `{"repo":"r","paths":[]}`, messages.CodeTooManyPaths},
		{"/v1/reservations/check", `{"repo":"r","paths":["` + strings.Join(many, `","`) + `"]}`, messages.CodeTooManyPaths},
	} {
		st, code := postRaw(t, paths.Socket(), tokB, bad.path, bad.body)
		if st != http.StatusBadRequest || code != bad.code {
			t.Errorf("POST %s %s: %d %s, want 400 %s", bad.path, bad.body, st, code, bad.code)
		}
	}
	if _, err := b.Reservations(ctx, "", "a\tb"); !isCode(err, messages.CodeInvalidReservationRepo) {
		t.Errorf("GET /v1/reservations?repo=a<TAB>b: %v", err)
	}
	if list, err := c.Reservations(ctx, "", ""); err != nil || len(list.Reservations) != 1 || list.Reservations[0].HolderName != "beta" {
		t.Errorf("reservations after the bad input = %+v, %v", list, err)
	}
}

// postRaw posts body to path as the session tok and returns the status
// and the error code.
func postRaw(t *testing.T, sock, tok, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://localhost"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", messages.SessionHeader+" "+tok)
	res, err := unixClient(sock, 1).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var e messages.ErrorBody
	_ = json.NewDecoder(res.Body).Decode(&e)
	return res.StatusCode, e.Error
}

// TestSessionReservationSurvivesRestart: a session's grant outlives a
// restart of the daemon (the session comes back, the grant is read back
// and renewed): another session waiting two of its TTLs after the restart
// is refused; the session's end releases it; each transition is in the
// audit log.
func TestSessionReservationSurvivesRestart(t *testing.T) {
	paths := tempPaths(t)
	d := startEmbedded(t, paths)
	ctx := context.Background()
	c := ipc.NewClient(paths.Socket())
	tokA, _ := register(t, c, "sess-a", "alpha", os.Getpid())
	waitLinked(t, c.AsSession(tokA))
	got, err := c.AsSession(tokA).Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"src/**"}, TTLMs: 2000})
	if err != nil || !got.Granted {
		t.Fatalf("reserve = %+v, %v", got, err)
	}
	d.Close()

	d = startEmbedded(t, paths)
	defer d.Close()
	tokB, _ := register(t, c, "sess-b", "beta", os.Getpid())
	waitLinked(t, c.AsSession(tokA), c.AsSession(tokB))
	other, err := c.AsSession(tokB).Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"src/a.go"}, WaitMs: 4000})
	if err != nil || other.Granted || len(other.Conflicts) != 1 || other.Conflicts[0].FenceToken != got.FenceToken {
		t.Fatalf("two TTLs after the restart = %+v, %v; want alpha's grant, renewed", other, err)
	}
	if _, err := c.DeregisterSession(ctx, tokA); err != nil {
		t.Fatal(err)
	}
	if other, err = c.AsSession(tokB).Reserve(ctx, &messages.ReserveRequest{Repo: "git:r", Patterns: []string{"src/a.go"},
		WaitMs: 5000}); err != nil || !other.Granted {
		t.Fatalf("after alpha ended = %+v, %v", other, err)
	}
	page, err := c.Audit(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range page.Entries {
		if strings.HasPrefix(e.Kind, "reservation.") {
			kinds = append(kinds, e.Kind)
		}
	}
	if want := []string{"reservation.acquired", "reservation.released", "reservation.acquired"}; !slices.Equal(kinds, want) {
		t.Errorf("reservation entries of the audit log = %q, want %q", kinds, want)
	}
}
