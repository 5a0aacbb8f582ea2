package bench

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := percentiles(ds)
	want := Percentiles{P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}
	if got != want {
		t.Fatalf("percentiles = %+v, want %+v", got, want)
	}
	if ds[0] != 1000*time.Millisecond {
		t.Fatal("percentiles sorted its argument")
	}
	if (percentiles(nil) != Percentiles{}) {
		t.Fatal("percentiles of nothing")
	}
}

// fakeSender answers in order: the n-th send fails with codes[n] when set.
type fakeSender struct{ codes map[string]string }

func (f *fakeSender) send(_ context.Context, id, _ string) (string, error) {
	for suffix, code := range f.codes {
		if strings.HasSuffix(id, suffix) {
			return code, nil
		}
	}
	return "", nil
}

// TestRunCounts: errors are counted by code and not as delivered; a run
// needs clients and a count or a duration.
func TestRunCounts(t *testing.T) {
	rep, err := run(context.Background(), Options{Mode: ModeAccept, Clients: 4, Count: 100, Size: 8}, "t",
		&fakeSender{codes: map[string]string{"-7": "daemon_busy", "-42": "daemon_busy", "-99": "payload_too_large"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 100 || rep.Delivered != 97 || rep.Errors["daemon_busy"] != 2 || rep.Errors["payload_too_large"] != 1 {
		t.Fatalf("report %+v", rep)
	}
	for _, o := range []Options{{Mode: ModeAccept, Count: 1}, {Mode: ModeAccept, Clients: 1}} {
		if _, err := run(context.Background(), o, "t", &fakeSender{}, nil); err == nil {
			t.Errorf("run(%+v) accepted", o)
		}
	}
}

// TestProcCPU: this process's CPU time as /proc reports it grows with work
// and agrees with getrusage to within a tick or two.
func TestProcCPU(t *testing.T) {
	before, ok := procCPU(os.Getpid())
	if !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("no CPU time from /proc on Linux")
		}
		t.Skip("no /proc here")
	}
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; x++ { // work, not a wait
	}
	after, _ := procCPU(os.Getpid())
	if after <= before || x == 0 {
		t.Fatalf("CPU time %v then %v after 50 ms of work", before, after)
	}
	if _, ok := procCPU(-1); ok {
		t.Fatal("a CPU time for pid -1")
	}
}

func TestPerMessage(t *testing.T) {
	before := cpuSample{"broker": time.Second, "client": 0}
	after := cpuSample{"broker": 3 * time.Second, "client": time.Second, "bob": time.Second}
	got := perMessage(before, after, 1000)
	if got["broker"] != 2 || got["client"] != 1 || got["total"] != 3 || len(got) != 3 {
		t.Fatalf("perMessage = %v", got)
	}
	if perMessage(before, after, 0) != nil {
		t.Fatal("per message of nothing delivered")
	}
}
