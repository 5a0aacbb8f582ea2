package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/claudemesh/claudemesh-go/integration/wait"
)

// TestMetricsLint: the daemons' and the broker's /metrics, once a mesh has
// been at work, pass client_golang's promlint — Prometheus's naming
// conventions: base units (seconds, not ms), _total on counters and only
// there, no type in a name, help on every series — and a share is a
// ratio, not a percentage; and carry the series renamed to them. On both
// of the broker's stores.
func TestMetricsLint(t *testing.T) {
	t.Parallel()
	for store, mesh := range map[string]func(*testing.T) *e2eMesh{"sqlite": newE2EMesh, "postgres": newE2EMeshOnPostgres} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			lintMesh(t, mesh(t))
		})
	}
}

// lintMesh puts m to work, then lints its daemons' and its broker's
// metrics.
func lintMesh(t *testing.T, m *e2eMesh) {
	alice, bob := m.alice, m.bob
	alice.start(t)
	bob.start(t)
	for i := range 2 {
		if st, body, err := trySend(alice.c, bob.pubkey, "lint me", fmt.Sprintf("lint-%d", i)); err != nil || st != http.StatusAccepted {
			t.Fatalf("send lint-%d: %d %v %s", i, st, err, body)
		}
	}
	if r := runCLI(t, alice.env, "hook", "Stop"); r.code != 0 { // no input: a failure the receiver records
		t.Fatalf("hook Stop: exit %d\n%s", r.code, r.stderr)
	}
	wait.For(t, e2eDeliverDeadline, "alice's sends to be done", func() bool { return len(listAll(t, alice.c, "done")) == 2 })

	scrape := func(c *http.Client, url string) []byte {
		t.Helper()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
		}
		return raw
	}
	lintMetrics(t, "alice's daemon", scrape(alice.c, "http://localhost/v1/metrics"), "cm_daemon_lag_seconds", "cm_daemon_disk_ratio",
		"cm_daemon_ipc_requests_total", "cm_daemon_hook_receiver_errors_total", "cm_daemon_dispatch_seconds")
	var bobs []byte
	wait.For(t, e2eDeliverDeadline, "bob's metrics to count what he received", func() bool { // after his inbox's fsync
		bobs = scrape(bob.c, "http://localhost/v1/metrics")
		return bytes.Contains(bobs, []byte("\ncm_daemon_recv_total{"))
	})
	lintMetrics(t, "bob's daemon", bobs)
	lintMetrics(t, "the broker", scrape(http.DefaultClient, "http://"+m.broker.addr+"/metrics"), "cm_broker_accept_seconds",
		"cm_broker_accept_total", "cm_broker_rate_limit_spent_on_rejected_total")
}

// lintMetrics fails the test on each problem promlint (and notPercent)
// finds in the Prometheus text, and on a family of want it lacks.
func lintMetrics(t *testing.T, who string, text []byte, want ...string) {
	t.Helper()
	l := promlint.New(bytes.NewReader(text))
	l.AddCustomValidations(notPercent)
	problems, err := l.Lint()
	if err != nil {
		t.Fatalf("%s's metrics do not parse: %v", who, err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s: %s", who, p.Metric, p.Text)
	}
	for _, name := range want {
		if !bytes.Contains(text, []byte("\n# TYPE "+name+" ")) {
			t.Errorf("%s's metrics lack %s", who, name)
		}
	}
}

// notPercent refuses a series of ours in percent: Prometheus keeps shares
// as ratios, 0 to 1, named _ratio. (GOGC is a percentage: Go's own
// go_gc_gogc_percent says so.)
func notPercent(mf *dto.MetricFamily) []error {
	if !strings.HasPrefix(mf.GetName(), "cm_") {
		return nil
	}
	for _, word := range strings.Split(mf.GetName(), "_") {
		if word == "pct" || word == "percent" || word == "percentage" {
			return []error{fmt.Errorf("a share in percent: give it as a ratio (0 to 1) named _ratio")}
		}
	}
	return nil
}
