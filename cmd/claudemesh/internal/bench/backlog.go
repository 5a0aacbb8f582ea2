package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// ModeBacklog measures the daemon's backoff against a broker's rate limit.
const ModeBacklog = "backlog"

// backlogPoll spaces the checks of alice's outbox and bob's inbox: once a
// second, as a monitoring scrape would, since their CPU counts in alice's.
const backlogPoll = time.Second

// runBacklog queues opts.Count DMs from alice to bob, one client, as fast
// as alice's daemon accepts them, and waits until her outbox has sent them
// all (the broker paces that); then reads how many attempts the broker
// refused for its rate limit (cm_daemon_send_refused_total), the CPU time
// of alice's daemon per minute while it drained the backlog (from the last
// 202 on: the accepts are not the backoff's cost), and bob's inbox: a
// message missing is lost, one there twice a duplicate, one before an
// earlier one an error (out_of_order).
func runBacklog(ctx context.Context, opts Options, env *Env) (*Report, error) {
	alice, bob := env.Peers[0], env.Peers[1]
	hc, bc := unixClient(alice.Socket, 1), unixClient(bob.Socket, 1)
	defer hc.CloseIdleConnections()
	defer bc.CloseIdleConnections()
	clock := env.cpuClock()
	before, start := clock.sample(), time.Now()
	rep := &Report{Mode: ModeBacklog, Clients: 1, Size: opts.Size, Errors: map[string]int{}}
	body := strings.Repeat("x", max(opts.Size-8, 0))
	for i := range opts.Count {
		code, err := postSend(ctx, hc, map[string]string{"to": bob.Membership.Pubkey, "message": fmt.Sprintf("%08d", i) + body,
			"client_message_id": backlogID(i)}, "")
		if err != nil {
			return nil, err
		}
		if code != "" {
			rep.Errors[code]++
			continue
		}
		rep.Sent++
	}
	queued, queuedAt := clock.sample(), time.Now()
	if err := waitOutboxSent(ctx, hc); err != nil {
		return nil, err
	}
	after := clock.sample()
	rep.ElapsedS = time.Since(start).Seconds()
	rep.CPUMsPerMsg = perMessage(before, after, rep.Sent)
	rep.DaemonCPUSPerMin = (after["alice"] - queued["alice"]).Seconds() / time.Since(queuedAt).Minutes()
	refused, err := scrapeCounter(ctx, hc, `cm_daemon_send_refused_total{mesh="`+alice.Membership.Slug+`",reason="rate_limit"}`)
	if err != nil {
		return nil, err
	}
	rep.Refused = int(refused)
	if err := checkBacklogInbox(ctx, bc, opts.Count, rep); err != nil {
		return nil, err
	}
	rep.Throughput = float64(rep.Delivered) / rep.ElapsedS
	return rep, nil
}

func backlogID(i int) string { return fmt.Sprintf("backlog-%08d", i) }

// waitOutboxSent waits until the daemon's outbox has nothing pending or
// inflight; a dead row is an error.
func waitOutboxSent(ctx context.Context, hc *http.Client) error {
	for {
		var h messages.Health
		if err := getJSON(ctx, hc, "/v1/health", &h); err != nil {
			return err
		}
		left := 0
		for _, m := range h.Meshes {
			if m.Dead > 0 {
				return fmt.Errorf("bench: %d rows of mesh %s went dead", m.Dead, m.Mesh)
			}
			left += m.QueueDepth + m.Inflight
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backlogPoll): // poll interval; the condition is re-checked
		}
	}
}

// checkBacklogInbox reads the receiver's inbox, oldest first, until the
// messages of all count ids are there or DrainTimeout passes, and counts
// what arrived, lost, twice, and out of order.
func checkBacklogInbox(ctx context.Context, bc *http.Client, count int, rep *Report) error {
	deadline := time.Now().Add(DrainTimeout)
	for {
		seen := map[string]int{}
		next, outOfOrder := 0, 0
		after := ""
		for {
			path := "/v1/inbox?limit=500"
			if after != "" {
				path += "&after=" + after
			}
			var page messages.InboxPage
			if err := getJSON(ctx, bc, path, &page); err != nil {
				return err
			}
			for _, it := range page.Items {
				n, err := strconv.Atoi(strings.TrimPrefix(it.ClientMessageID, "backlog-"))
				if err != nil || !strings.HasPrefix(it.ClientMessageID, "backlog-") {
					continue
				}
				if seen[it.ClientMessageID]++; seen[it.ClientMessageID] == 1 && n < next {
					outOfOrder++
				}
				next = max(next, n+1)
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		rep.Delivered, rep.Duplicates = len(seen), 0
		for _, n := range seen {
			rep.Duplicates += n - 1
		}
		rep.Lost = count - len(seen)
		if outOfOrder > 0 {
			rep.Errors["out_of_order"] = outOfOrder
		}
		if rep.Lost == 0 || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backlogPoll): // poll interval; the condition is re-checked
		}
	}
}

// getJSON decodes the answer to GET path on the daemon.
func getJSON(ctx context.Context, hc *http.Client, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost"+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// scrapeCounter reads one series of the daemon's GET /v1/metrics (0 when
// absent).
func scrapeCounter(ctx context.Context, hc *http.Client, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/v1/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, sc.Err()
}
