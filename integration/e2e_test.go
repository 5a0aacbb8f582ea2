package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/integration/wait"
	"github.com/claudemesh/claudemesh-go/messages"
)

// TestE2EDirectMessage: a DM from alice's daemon reaches bob's event stream
// within a second of the 202, once in his inbox, and alice's outbox row is
// done with the broker_message_id bob's row carries; a retry of the same id
// and body changes nothing at bob.
func TestE2EDirectMessage(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	stream := openSSE(t, bob.env.socket(), "")

	const plaintext = "hello bob — end to end through two daemons and a broker"
	st, body, err := trySend(alice.c, bob.pubkey, plaintext, "dm-1")
	accepted := time.Now()
	if err != nil || st != http.StatusAccepted {
		t.Fatalf("send dm-1: status %d, %v: %s", st, err, body)
	}
	ev := stream.next("message", e2eDeliverDeadline)
	latency := max(ev.At.Sub(accepted), 0)
	t.Logf("DM latency (202 at alice → message event at bob): %s", latency)
	if latency > e2eDMLatencyBound {
		t.Errorf("DM latency %s, want ≤ %s", latency, e2eDMLatencyBound)
	}
	got := messageOf(t, ev)
	if got.Body == nil || *got.Body != plaintext || got.ClientMessageID != "dm-1" || got.SenderPubkey != alice.pubkey ||
		got.SenderName != "alice" || got.Mesh != "demo" || got.Kind != "dm" || got.BrokerMessageID == "" || ev.ID <= 0 {
		t.Fatalf("bob's message event id %d: %s", ev.ID, ev.Data)
	}

	rows := inboxAll(t, bob.c)
	if n := inboxCounts(rows)["dm-1"]; n != 1 || len(rows) != 1 {
		t.Fatalf("bob's inbox holds dm-1 %d times (%d rows), want once", n, len(rows))
	}
	if rows[0].BrokerMessageID != got.BrokerMessageID || rows[0].Body == nil || *rows[0].Body != plaintext {
		t.Fatalf("bob's inbox row %+v does not match the event %s", rows[0], ev.Data)
	}

	var row outboxItem
	wait.For(t, e2eDeliverDeadline, "alice's dm-1 row to be done", func() bool {
		r, ok := byClientID(listAll(t, alice.c, "done"))["dm-1"]
		row = r
		return ok
	})
	if row.Status != messages.StatusDone || row.BrokerMessageID == nil || *row.BrokerMessageID != rows[0].BrokerMessageID ||
		row.To != bob.pubkey || row.DeliveredAt == nil {
		t.Fatalf("alice's outbox row %+v, want done with broker_message_id %s", row, rows[0].BrokerMessageID)
	}

	// The same id and body again: a duplicate (200) or, by row state, 202.
	st, body, err = trySend(alice.c, bob.pubkey, plaintext, "dm-1")
	if err != nil || (st != http.StatusOK && st != http.StatusAccepted) {
		t.Fatalf("resend dm-1: status %d, %v: %s", st, err, body)
	}
	if st == http.StatusOK {
		var dup messages.SendDuplicate
		if err := json.Unmarshal(body, &dup); err != nil || !dup.Duplicate || dup.BrokerMessageID == nil ||
			*dup.BrokerMessageID != rows[0].BrokerMessageID {
			t.Fatalf("resend dm-1: 200 %s, want duplicate of %s", body, rows[0].BrokerMessageID)
		}
	}
	// A marker after the retry: once bob has it, a redelivery of dm-1 would
	// have been stored (or deduplicated) already.
	if st, body, err := trySend(alice.c, bob.pubkey, "marker", "dm-2"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send dm-2: status %d, %v: %s", st, err, body)
	}
	if it := messageOf(t, stream.next("message", e2eDeliverDeadline)); it.ClientMessageID != "dm-2" {
		t.Fatalf("bob's next message event is %s, want the marker dm-2", it.ClientMessageID)
	}
	wait.For(t, e2eDeliverDeadline, "alice's outbox to settle", func() bool {
		h := health(t, alice.c)
		return h.QueueDepth == 0 && h.Inflight == 0
	})
	counts := inboxCounts(inboxAll(t, bob.c))
	if counts["dm-1"] != 1 || counts["dm-2"] != 1 || len(counts) != 2 {
		t.Fatalf("bob's inbox after the retry: %v, want dm-1 and dm-2 once each", counts)
	}

	// The metrics say the same (GET /v1/metrics).
	scrape := func(p *e2ePeer) string {
		t.Helper()
		resp, err := p.c.Get("http://localhost/v1/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s's GET /v1/metrics: %d %s", p.name, resp.StatusCode, raw)
		}
		return string(raw)
	}
	for _, c := range []struct {
		p    *e2ePeer
		want []string
	}{
		{bob, []string{`cm_daemon_recv_total{from_type="peer",kind="dm",mesh="demo"} 2`, `cm_daemon_connected{mesh="demo"} 1`,
			`cm_daemon_store_commit_seconds_count{db="inbox",durability="wal_sync"}`}},
		{alice, []string{`cm_daemon_dispatch_seconds_count{mesh="demo",outcome="done"}`, `cm_daemon_connected{mesh="demo"} 1`,
			`cm_daemon_outbox_depth{mesh="demo",status="pending"} 0`, `cm_daemon_send_total{kind="dm",mesh="demo",status="queued"} 2`}},
	} {
		for _, w := range c.want {
			// bob counts a message when its store answers, after the
			// inbox fsync (up to InboxSyncDelay after the event).
			wait.For(t, e2eDeliverDeadline, c.p.name+"'s metrics to show "+w, func() bool { return strings.Contains(scrape(c.p), w) })
		}
	}
	if r := runCLI(t, alice.env, "daemon", "metrics"); r.code != 0 || !strings.Contains(r.stdout, `cm_daemon_send_total{kind="dm",mesh="demo"`) {
		t.Errorf("claudemesh daemon metrics: exit %d\nstdout %.300q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	// Each row went out once, marked first_send (the IPC answered the
	// resend from the outbox): the broker skipped both B0 reads.
	resp, err := http.Get("http://" + m.broker.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, w := range []string{"cm_broker_first_send_total 2\n", `cm_broker_accept_total{outcome="created"} 2`} {
		if !strings.Contains(string(raw), w) {
			t.Errorf("the broker's /metrics lacks %q", w)
		}
	}
}

// TestE2EBrokerRestarts: 1,000 DMs sent from 8 goroutines while the broker
// is SIGKILLed twice and restarted on the same port and directory all end
// done at alice and exactly once at bob.
func TestE2EBrokerRestarts(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	const total, senders = 1000, 8
	var next, accepted atomic.Int64
	var errMu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	// Pacing (not synchronization): about 330 sends a second, so that both
	// kills land while sends are still coming and deliveries are in flight.
	pace := time.NewTicker(3 * time.Millisecond)
	defer pace.Stop()
	for range senders {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				<-pace.C
				id := fmt.Sprintf("bulk-%04d", i)
				st, body, err := trySend(alice.c, bob.pubkey, "bulk message "+id, id)
				if err != nil || st != http.StatusAccepted {
					errMu.Lock()
					errs = append(errs, fmt.Sprintf("%s: status %d, %v: %s", id, st, err, body))
					errMu.Unlock()
					continue
				}
				accepted.Add(1)
			}
		})
	}
	start := time.Now()
	for _, at := range []int64{300, 600} {
		// Both daemons are connected when the broker dies: the kill cuts
		// live links with sends in flight.
		wait.For(t, e2eRecoveryDeadline, fmt.Sprintf("%d accepted sends with both daemons connected", at), func() bool {
			return accepted.Load() >= at && alice.connected() && bob.connected()
		})
		m.killBroker()
		t.Logf("broker SIGKILLed after %d accepted sends (%s)", accepted.Load(), time.Since(start).Round(time.Millisecond))
		m.restartBroker()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d sends were not answered 202, first: %s", len(errs), errs[0])
	}
	t.Logf("1000 sends accepted in %s", time.Since(start).Round(time.Millisecond))
	if n := strings.Count(alice.d.stderr.String(), `"msg":"broker_disconnected"`); n < 2 {
		t.Errorf("alice's daemon logged %d broker_disconnected, want one per kill (2)", n)
	}

	var h meshHealth
	if err := wait.UntilEvery(e2eRecoveryDeadline, 50*time.Millisecond, "alice's outbox to drain", func() bool {
		h = health(t, alice.c)
		if h.Dead > 0 {
			t.Fatalf("alice's outbox has %d dead rows: %+v", h.Dead, listAll(t, alice.c, messages.StatusDead))
		}
		return h.QueueDepth == 0 && h.Inflight == 0
	}); err != nil {
		t.Fatalf("%v (last health %+v)", err, h)
	}
	done := listAll(t, alice.c, messages.StatusDone)
	if len(done) != total {
		t.Fatalf("alice's outbox has %d done rows, want %d", len(done), total)
	}
	var counts map[string]int
	var rows int
	if err := wait.UntilEvery(e2eRecoveryDeadline, 100*time.Millisecond, fmt.Sprintf("bob's inbox to hold %d ids", total), func() bool {
		items := inboxAll(t, bob.c)
		counts, rows = inboxCounts(items), len(items)
		return len(counts) >= total
	}); err != nil {
		var missing []string
		for i := range total {
			if id := fmt.Sprintf("bulk-%04d", i); counts[id] == 0 {
				missing = append(missing, id)
			}
		}
		t.Fatalf("%v (has %d ids in %d rows); missing:\n%s", err, len(counts), rows, m.diagnose(t, missing))
	}
	t.Logf("all %d delivered %s after the first send", total, time.Since(start).Round(time.Millisecond))
	if rows != total || len(counts) != total {
		t.Fatalf("bob's inbox: %d rows, %d distinct ids; want %d of each", rows, len(counts), total)
	}
	for i := range total {
		if id := fmt.Sprintf("bulk-%04d", i); counts[id] != 1 {
			t.Fatalf("bob's inbox holds %s %d times", id, counts[id])
		}
	}
	// Every done row's broker_message_id is the one bob stored.
	bobIDs := map[string]string{}
	for _, it := range inboxAll(t, bob.c) {
		bobIDs[it.ClientMessageID] = it.BrokerMessageID
	}
	for _, r := range done {
		if r.BrokerMessageID == nil || *r.BrokerMessageID != bobIDs[r.ClientMessageID] {
			t.Fatalf("alice's row %s has broker_message_id %v, bob stored %q", r.ClientMessageID, r.BrokerMessageID, bobIDs[r.ClientMessageID])
		}
	}
}

// TestE2EDaemonKill9: alice's daemon is SIGKILLed while 4 goroutines send;
// after a restart every send it answered 202 reaches bob exactly once.
func TestE2EDaemonKill9(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	var next atomic.Int64
	var mu sync.Mutex
	accepted := map[string]bool{}  // answered 202
	attempted := map[string]bool{} // posted, whatever the answer
	var stop atomic.Bool
	var wg sync.WaitGroup
	c := unixClient(alice.env.socket())
	defer c.CloseIdleConnections()
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				id := fmt.Sprintf("crash-%05d", next.Add(1))
				mu.Lock()
				attempted[id] = true
				mu.Unlock()
				st, _, err := trySend(c, bob.pubkey, "sent across a kill -9: "+id, id)
				if err != nil {
					return // the daemon is gone: the answer is unknown
				}
				if st == http.StatusAccepted {
					mu.Lock()
					accepted[id] = true
					mu.Unlock()
				}
			}
		})
	}
	nAccepted := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted)
	}
	wait.For(t, e2eDeliverDeadline, "200 accepted sends", func() bool { return nAccepted() >= 200 })
	alice.d.kill9()
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	acc := len(accepted)
	mu.Unlock()
	t.Logf("alice's daemon SIGKILLed: %d sends answered 202, %d attempted", acc, len(attempted))

	alice.start(t)
	var counts map[string]int
	missing := 0
	if err := wait.UntilEvery(e2eRecoveryDeadline, 50*time.Millisecond, "bob's inbox to hold every 202'd id", func() bool {
		counts = inboxCounts(inboxAll(t, bob.c))
		missing = 0
		for id := range accepted {
			if counts[id] == 0 {
				missing++
			}
		}
		return missing == 0
	}); err != nil {
		var ids []string
		for id := range accepted {
			if counts[id] == 0 {
				ids = append(ids, id)
			}
		}
		t.Fatalf("%v (%d missing):\n%s", err, missing, m.diagnose(t, ids))
	}
	for id, n := range counts {
		if n != 1 {
			t.Errorf("bob's inbox holds %s %d times", id, n)
		}
		if !attempted[id] {
			t.Errorf("bob's inbox holds %s, which was never sent", id)
		}
	}
	// Alice's rows of the accepted sends all end done (inflight ones at the
	// kill are recovered and resent; the broker answers them duplicate).
	if err := wait.UntilEvery(e2eRecoveryDeadline, 50*time.Millisecond, "alice's outbox to drain", func() bool {
		h := health(t, alice.c)
		return h.QueueDepth == 0 && h.Inflight == 0
	}); err != nil {
		t.Fatal(err)
	}
	done := byClientID(listAll(t, alice.c, messages.StatusDone))
	for id := range accepted {
		if _, ok := done[id]; !ok {
			t.Errorf("alice's outbox has no done row for 202'd %s", id)
		}
	}
}

// TestE2ESSEResume: a stream resumed with Last-Event-ID delivers exactly the
// events after that id, in order, then live ones.
func TestE2ESSEResume(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)

	send := func(id string) {
		t.Helper()
		if st, body, err := trySend(alice.c, bob.pubkey, "resume "+id, id); err != nil || st != http.StatusAccepted {
			t.Fatalf("send %s: status %d, %v: %s", id, st, err, body)
		}
	}
	first := openSSE(t, bob.env.socket(), "")
	for i := 1; i <= 4; i++ {
		send(fmt.Sprintf("r-%d", i))
	}
	var seen []sseEvent
	for len(seen) < 3 {
		seen = append(seen, first.next("message", e2eDeliverDeadline))
	}
	mark := seen[2].ID
	first.close()
	for i := 5; i <= 9; i++ {
		send(fmt.Sprintf("r-%d", i))
	}
	wait.For(t, e2eDeliverDeadline, "bob's inbox to hold r-1…r-9", func() bool { return len(inboxCounts(inboxAll(t, bob.c))) == 9 })

	// The whole log, replayed from 0, says what "after mark" is.
	full := openSSE(t, bob.env.socket(), "0")
	var all []sseEvent
	for len(all) < 9 {
		all = append(all, full.next("message", e2eDeliverDeadline))
	}
	full.close()
	for i, ev := range all {
		if i > 0 && ev.ID <= all[i-1].ID {
			t.Fatalf("replay from 0: event %d after %d", ev.ID, all[i-1].ID)
		}
		if i < 3 && (ev.ID != seen[i].ID || !bytes.Equal(ev.Data, seen[i].Data)) {
			t.Fatalf("replay from 0: event %d is %d %s, the live stream had %d %s", i, ev.ID, ev.Data, seen[i].ID, seen[i].Data)
		}
	}
	want := all[3:]

	resumed := openSSE(t, bob.env.socket(), strconv.FormatInt(mark, 10))
	for i, w := range want {
		ev := resumed.next("message", e2eDeliverDeadline)
		if ev.ID != w.ID || !bytes.Equal(ev.Data, w.Data) {
			t.Fatalf("resumed event %d: id %d %s, want id %d %s", i, ev.ID, ev.Data, w.ID, w.Data)
		}
	}
	send("r-10")
	ev := resumed.next("message", e2eDeliverDeadline)
	if it := messageOf(t, ev); it.ClientMessageID != "r-10" || ev.ID <= want[len(want)-1].ID {
		t.Fatalf("after the replay the stream delivered %d %s, want the live r-10", ev.ID, ev.Data)
	}
	// The three seen before the disconnect and the missed ones are r-1…r-9,
	// each once.
	got := map[string]int{}
	for _, ev := range append(slices.Clone(seen[:3]), want...) {
		got[messageOf(t, ev).ClientMessageID]++
	}
	for i := 1; i <= 9; i++ {
		if id := fmt.Sprintf("r-%d", i); got[id] != 1 {
			t.Errorf("%s appears %d times among the seen and the missed events", id, got[id])
		}
	}

	// Across a restart of bob's daemon: the id sequence moves on (it jumps
	// at each start), and a reader resuming from the last id it saw gets
	// what came while it was away, exactly.
	resumed.close()
	last := ev.ID
	bob.d.stop()
	bob.start(t)
	send("r-11")
	wait.For(t, e2eDeliverDeadline, "bob's inbox to hold r-11", func() bool { return len(inboxCounts(inboxAll(t, bob.c))) == 11 })
	after := openSSE(t, bob.env.socket(), strconv.FormatInt(last, 10))
	defer after.close()
	ev = after.next("message", e2eDeliverDeadline)
	if it := messageOf(t, ev); it.ClientMessageID != "r-11" || ev.ID <= last+1 {
		t.Fatalf("resumed after the restart from %d: %d %s, want r-11 past a jump in the ids", last, ev.ID, ev.Data)
	}
}

// TestE2EQueuedKeepsSenderName: a DM that waits at the broker for its
// offline recipient reaches it, when its daemon starts, with the sender's
// display name, as a live push does (the queued push once carried only the
// sender's key, and the inbox showed its first 8 digits).
func TestE2EQueuedKeepsSenderName(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	bob.d.stop()
	if st, body, err := trySend(alice.c, bob.pubkey, "while you were away", "queued-1"); err != nil || st != http.StatusAccepted {
		t.Fatalf("send: status %d, %v: %s", st, err, body)
	}
	wait.For(t, e2eDeliverDeadline, "alice's queued-1 to reach the broker", func() bool {
		_, done := byClientID(listAll(t, alice.c, "done"))["queued-1"]
		return done
	})
	bob.start(t)
	var rows []messages.InboxItem
	wait.For(t, e2eDeliverDeadline, "bob's inbox to hold queued-1", func() bool {
		rows = inboxAll(t, bob.c)
		return len(rows) == 1
	})
	if rows[0].ClientMessageID != "queued-1" || rows[0].SenderName != "alice" {
		t.Fatalf("bob's queued message: %+v", rows[0])
	}
}

// TestE2EPeersWithoutBroker: with the mesh's broker gone, `claudemesh
// peers` says so and fails, instead of answering "no peers" as if the mesh
// were empty; GET /v1/peers names the mesh in failed.
func TestE2EPeersWithoutBroker(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice := m.alice
	alice.start(t)
	wait.For(t, e2eConnectDeadline, "alice connected", alice.connected)
	m.killBroker()
	wait.For(t, e2eRecoveryDeadline, "alice to see the broker gone", func() bool { return !alice.connected() })
	r := runCLI(t, alice.env, "peers")
	if r.code != 1 || !strings.Contains(r.stderr, "mesh demo is not listed") || !strings.Contains(r.stderr, "no broker answered") {
		t.Fatalf("peers without the broker: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var body struct {
		Peers  []any             `json:"peers"`
		Failed map[string]string `json:"failed"`
	}
	if st, _, err := getJSON(alice.c, "http://localhost/v1/peers", &body); err != nil || st != http.StatusOK || body.Failed["demo"] == "" {
		t.Fatalf("GET /v1/peers without the broker: %d %+v %v", st, body, err)
	}
}

// TestE2EPresence: bob's daemon coming up after alice's shows as peer_join
// on alice's stream, and alice's peer list names bob.
func TestE2EPresence(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	alice, bob := m.alice, m.bob
	alice.start(t)
	stream := openSSE(t, alice.env.socket(), "")
	bob.start(t)

	deadline := time.Now().Add(e2eDeliverDeadline)
	for {
		ev := stream.next("peer_join", time.Until(deadline))
		var d map[string]string
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatalf("peer_join data %q: %v", ev.Data, err)
		}
		if d["pubkey"] == bob.pubkey {
			if d["mesh"] != "demo" || d["display_name"] != "bob" || ev.ID <= 0 {
				t.Errorf("peer_join %d for bob: %s", ev.ID, ev.Data)
			}
			break
		}
	}

	var peers struct {
		Peers []struct {
			Mesh         string `json:"mesh"`
			Pubkey       string `json:"pubkey"`
			MemberPubkey string `json:"memberPubkey"`
			DisplayName  string `json:"displayName"`
		} `json:"peers"`
	}
	st, _, err := getJSON(alice.c, "http://localhost/v1/peers", &peers)
	if err != nil || st != http.StatusOK {
		t.Fatalf("GET /v1/peers: %d %v", st, err)
	}
	found := false
	for _, p := range peers.Peers {
		if p.Pubkey == bob.pubkey || p.MemberPubkey == bob.pubkey {
			found = true
			if p.Mesh != "demo" || p.DisplayName != "bob" {
				t.Errorf("alice's peer entry for bob: %+v", p)
			}
		}
	}
	if !found {
		t.Fatalf("alice's GET /v1/peers does not list bob (%s): %+v", bob.pubkey, peers)
	}
	if r := runCLI(t, alice.env, "peers", "--mesh", "demo"); r.code != 0 || !strings.Contains(r.stdout, bob.pubkey) ||
		!strings.Contains(r.stdout, "bob") {
		t.Errorf("claudemesh peers: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Bob sets his profile; GET /v1/profile reads it back from the broker,
	// and alice's peer list shows it.
	r := do(t, bob.c, newRequest(t, http.MethodPost, "http://localhost/v1/profile",
		[]byte(`{"status":"working","summary":"reviewing #12","title":"reviewer","capabilities":["go","sql"]}`)))
	if r.status != http.StatusOK {
		t.Fatalf("bob's POST /v1/profile: %d %s", r.status, r.body)
	}
	var own struct {
		Profiles []struct {
			Mesh         string   `json:"mesh"`
			MemberPubkey string   `json:"member_pubkey"`
			Status       string   `json:"status"`
			Summary      string   `json:"summary"`
			Title        string   `json:"title"`
			Capabilities []string `json:"capabilities"`
		} `json:"profiles"`
	}
	if st, _, err := getJSON(bob.c, "http://localhost/v1/profile", &own); err != nil || st != http.StatusOK || len(own.Profiles) != 1 {
		t.Fatalf("bob's GET /v1/profile: %d %v %+v", st, err, own)
	}
	if p := own.Profiles[0]; p.Mesh != "demo" || p.MemberPubkey != bob.pubkey || p.Status != "working" ||
		p.Summary != "reviewing #12" || p.Title != "reviewer" || strings.Join(p.Capabilities, ",") != "go,sql" {
		t.Errorf("bob's profile: %+v", p)
	}
	var seen struct {
		Peers []struct {
			MemberPubkey string `json:"memberPubkey"`
			Summary      string `json:"summary"`
		} `json:"peers"`
	}
	if _, _, err := getJSON(alice.c, "http://localhost/v1/peers?mesh=demo", &seen); err != nil {
		t.Fatal(err)
	}
	shown := false
	for _, p := range seen.Peers {
		shown = shown || p.MemberPubkey == bob.pubkey && p.Summary == "reviewing #12"
	}
	if !shown {
		t.Errorf("alice's peer list does not show bob's summary: %+v", seen.Peers)
	}
}

// TestE2EConnectionEvents: a broker restart shows on the daemon's event
// stream as daemon_disconnect, then broker_status and daemon_reconnect.
func TestE2EConnectionEvents(t *testing.T) {
	t.Parallel()
	m := newE2EMesh(t)
	m.alice.start(t)
	m.alice.waitConnected(t)
	stream := openSSE(t, m.alice.env.socket(), "")
	m.killBroker()
	m.restartBroker()
	for _, name := range []string{"daemon_disconnect", "broker_status", "daemon_reconnect"} {
		stream.next(name, e2eRecoveryDeadline)
	}
}
