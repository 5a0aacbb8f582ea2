package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// TestState: shared state through the real binaries — `claudemesh state`
// on alice's and bob's daemons, our broker between them. A set reaches the
// other daemon as the SSE event state_change; get and list show the value,
// version and setter; a stale --if-version is refused with the current
// version and nothing is set; a missing key, a value that is no JSON and
// an oversized value are refused with what to do.
func TestState(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	stateCLI := func(p *e2ePeer, out any, args ...string) {
		t.Helper()
		r := runCLI(t, p.env, append([]string{"state"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%s: claudemesh state %s: exit %d\nstdout %s\nstderr %s", p.name, strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
				t.Fatalf("claudemesh state %s --json printed %q: %v", strings.Join(args, " "), r.stdout, err)
			}
		}
	}
	refused := func(p *e2ePeer, want string, args ...string) {
		t.Helper()
		if r := runCLI(t, p.env, append([]string{"state"}, args...)...); r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("claudemesh state %.80s: exit %d\n%s%s; want a failure saying %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, want)
		}
	}

	var v messages.Version
	if st, _, err := getJSON(alice.c, "http://localhost/v1/version", &v); err != nil || st != http.StatusOK ||
		!slices.Contains(v.IPCFeatures, "state") {
		t.Errorf("version: %d %v; ipc_features %v, want state among them", st, err, v.IPCFeatures)
	}

	stream := openSSE(t, bob.env.socket(), "")
	var set messages.StateSetDone
	stateCLI(alice, &set, "set", "release", `{"owner": "alice"}`, "--json")
	if !set.OK || set.Key != "release" || set.Version != 1 || set.Mesh != "demo" {
		t.Fatalf("state set: %+v", set)
	}
	var change messages.StateView
	if ev := stream.next("state_change", e2eDeliverDeadline); json.Unmarshal(ev.Data, &change) != nil || change.Key != "release" ||
		string(change.Value) != `{"owner":"alice"}` || change.Version != 1 || change.UpdatedBy != "alice" || change.Mesh != "demo" {
		t.Fatalf("bob's state_change: %s", ev.Data)
	}
	var got messages.StateGot
	stateCLI(bob, &got, "get", "release", "--json")
	if got.State.Version != 1 || string(got.State.Value) != `{"owner":"alice"}` || got.State.UpdatedBy != "alice" ||
		got.State.UpdatedByPubkey != alice.pubkey || got.State.Mesh != "demo" {
		t.Fatalf("state get: %+v", got)
	}

	refused(bob, "version 1, not 0", "set", "release", `"bob"`, "--if-version", "0")
	stateCLI(bob, &set, "set", "release", `"bob"`, "--if-version", "1", "--json")
	if set.Version != 2 {
		t.Fatalf("compare-and-set at version 1: %+v", set)
	}
	refused(alice, "state list", "get", "nope")
	refused(alice, "not JSON", "set", "k", "not json")
	refused(alice, "state_value_too_large", "set", "k", `"`+strings.Repeat("x", messages.MaxStateValue)+`"`)
	refused(alice, "mesh", "list", "--mesh", "elsewhere")

	var list messages.StateList
	stateCLI(alice, &list, "list", "--json")
	if len(list.Entries) != 1 || list.Entries[0].Key != "release" || string(list.Entries[0].Value) != `"bob"` || list.Entries[0].Version != 2 {
		t.Fatalf("state list: %+v", list)
	}
	if r := runCLI(t, alice.env, "state", "get", "release"); r.code != 0 || !strings.Contains(r.stdout, `release = "bob"`) ||
		!strings.Contains(r.stdout, "version 2, set by bob") {
		t.Errorf("state get (text): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestStateCompareAndSetConcurrently: 10 writers, five on each of two
// daemons, each add one to a counter 100 times by reading it and setting
// it with if_version; the counter ends at 1,000 at version 1,000: no
// update is lost.
func TestStateCompareAndSetConcurrently(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	m.alice.start(t)
	m.bob.start(t)
	clients := []*ipc.Client{ipc.NewClient(m.alice.env.socket()), ipc.NewClient(m.bob.env.socket())}
	const writers, each = 10, 100
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	var conflicts sync.Map
	for w := range writers {
		c := clients[w%2]
		wg.Go(func() {
			lost := 0
			for done := 0; done < each; {
				n, version, err := readCounter(ctx, c)
				if err != nil {
					errs <- err
					return
				}
				_, err = c.SetState(ctx, &messages.StateSetRequest{Key: "counter", Value: json.RawMessage(strconv.Itoa(n + 1)), IfVersion: &version})
				var me *messages.Error
				switch {
				case errors.As(err, &me) && me.Code == messages.CodeStateConflict:
					lost++
				case err != nil:
					errs <- err
					return
				default:
					done++
				}
			}
			conflicts.Store(w, lost)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, version, err := readCounter(ctx, clients[1])
	if err != nil || n != writers*each || version != writers*each {
		t.Fatalf("counter = %d at version %d (%v); want %d at version %d", n, version, err, writers*each, writers*each)
	}
	total := 0
	conflicts.Range(func(_, v any) bool { total += v.(int); return true })
	t.Logf("%d increments, %d compare-and-set conflicts retried", writers*each, total)
}

// readCounter reads the counter and its version (0, 0 before its first set).
func readCounter(ctx context.Context, c *ipc.Client) (int, int64, error) {
	got, err := c.State(ctx, "", "counter")
	var me *messages.Error
	switch {
	case errors.As(err, &me) && me.Code == messages.CodeStateNotFound:
		return 0, 0, nil
	case err != nil:
		return 0, 0, err
	}
	var n int
	err = json.Unmarshal(got.State.Value, &n)
	return n, got.State.Version, err
}

// TestStateLegacyBroker: daemons in legacy mode (`[features]
// legacy_broker`, as against upstream's broker, which answers a set
// nothing) send set_state without _reqId and answer it sent, with no
// version; the change still reaches the other daemon and reads back; a
// compare-and-set, which upstream cannot keep, is refused before anything
// is sent.
func TestStateLegacyBroker(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	m.restartBrokerWith("--legacy-protocol")
	alice, bob := m.alice, m.bob
	alice.startLegacy(t)
	bob.startLegacy(t)
	stream := openSSE(t, bob.env.socket(), "")
	if r := runCLI(t, alice.env, "state", "set", "build", `"red"`); r.code != 0 || !strings.Contains(r.stdout, "reports no versions") {
		t.Fatalf("state set on a legacy link: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var change messages.StateView
	if ev := stream.next("state_change", e2eDeliverDeadline); json.Unmarshal(ev.Data, &change) != nil || change.Key != "build" ||
		string(change.Value) != `"red"` {
		t.Fatalf("bob's state_change: %s", ev.Data)
	}
	if r := runCLI(t, bob.env, "state", "get", "build"); r.code != 0 || !strings.Contains(r.stdout, `build = "red"`) {
		t.Errorf("state get: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, alice.env, "state", "set", "build", `"green"`, "--if-version", "1"); r.code == 0 ||
		!strings.Contains(r.stderr, "state_cas_unsupported") {
		t.Errorf("compare-and-set on a legacy link: exit %d\n%s%s; want state_cas_unsupported", r.code, r.stdout, r.stderr)
	}
}
