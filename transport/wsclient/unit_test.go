package wsclient

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// TestMaxAgeTable: spec §4.11's worked values, with the A16 clamp (D = 3
// gives 48 h, strictly inside the 72 h window).
func TestMaxAgeTable(t *testing.T) {
	for _, tc := range []struct {
		days  int
		hours int
	}{{3, 48}, {4, 72}, {5, 96}, {7, 144}, {14, 302}, {30, 648}, {90, 1944}, {365, 7884}} {
		got := MaxAgeFor(ModeRetentionScoped, tc.days, 0)
		if got != time.Duration(tc.hours)*time.Hour {
			t.Errorf("D=%d: max age %s, want %dh", tc.days, got, tc.hours)
		}
		if got >= time.Duration(tc.days*24)*time.Hour {
			t.Errorf("D=%d: %s is not strictly inside the window", tc.days, got)
		}
	}
	for _, tc := range []struct{ def, want time.Duration }{
		{0, 168 * time.Hour}, {48 * time.Hour, 48 * time.Hour}, {1000 * time.Hour, 720 * time.Hour},
	} {
		if got := MaxAgeFor(ModePermanent, 0, tc.def); got != tc.want {
			t.Errorf("permanent default %s: %s, want %s", tc.def, got, tc.want)
		}
	}
	if got := (&Session{Legacy: true}).MaxAge(); got != 168*time.Hour {
		t.Errorf("legacy max age %s", got)
	}
	if got := (&Session{DedupeMode: ModeRetentionScoped, DedupeRetentionDays: 30}).MaxAge(); got != 648*time.Hour {
		t.Errorf("session D=30 max age %s", got)
	}
}

// TestValidate: spec §15.2's table.
func TestValidate(t *testing.T) {
	dedupe := func(r *messages.FeatureNegotiationResponseFrame) messages.FeatureParams {
		return r.Supported[FeatureDedupe].Params
	}
	for _, tc := range []struct {
		name    string
		edit    func(r *messages.FeatureNegotiationResponseFrame)
		kind    string // "" = accepted
		feature string
	}{
		{"good", func(*messages.FeatureNegotiationResponseFrame) {}, "", ""},
		{"missing_required lists dedupe", func(r *messages.FeatureNegotiationResponseFrame) {
			r.MissingRequired = []string{FeatureDedupe}
		}, KindUnavailable, FeatureDedupe},
		{"dedupe absent", func(r *messages.FeatureNegotiationResponseFrame) { delete(r.Supported, FeatureDedupe) }, KindUnavailable, FeatureDedupe},
		{"concurrency absent", func(r *messages.FeatureNegotiationResponseFrame) { delete(r.Supported, FeatureConcurrent) }, KindUnavailable, FeatureConcurrent},
		{"unknown version", func(r *messages.FeatureNegotiationResponseFrame) { dedupe(r)["version"] = 2.0 }, KindUnavailable, FeatureDedupe},
		{"no version", func(r *messages.FeatureNegotiationResponseFrame) { delete(dedupe(r), "version") }, KindUnavailable, FeatureDedupe},
		{"concurrency unknown version", func(r *messages.FeatureNegotiationResponseFrame) {
			r.Supported[FeatureConcurrent].Params["version"] = 7.0
		}, KindUnavailable, FeatureConcurrent},
		{"unknown mode", func(r *messages.FeatureNegotiationResponseFrame) { dedupe(r)["mode"] = "windowed" }, KindUnavailable, FeatureDedupe},
		{"fingerprint false", func(r *messages.FeatureNegotiationResponseFrame) { dedupe(r)["request_fingerprint"] = false }, KindUnavailable, FeatureDedupe},
		{"fingerprint absent", func(r *messages.FeatureNegotiationResponseFrame) { delete(dedupe(r), "request_fingerprint") }, KindUnavailable, FeatureDedupe},
		{"days absent", func(r *messages.FeatureNegotiationResponseFrame) { delete(dedupe(r), "dedupe_retention_days") }, KindParamInvalid, FeatureDedupe},
		{"days fractional", func(r *messages.FeatureNegotiationResponseFrame) { dedupe(r)["dedupe_retention_days"] = 3.5 }, KindParamInvalid, FeatureDedupe},
		{"days negative", func(r *messages.FeatureNegotiationResponseFrame) { dedupe(r)["dedupe_retention_days"] = -4.0 }, KindParamInvalid, FeatureDedupe},
		{"days 0", func(r *messages.FeatureNegotiationResponseFrame) { dedupe(r)["dedupe_retention_days"] = 0.0 }, KindParamInvalid, FeatureDedupe},
		{"days 2", func(r *messages.FeatureNegotiationResponseFrame) { dedupe(r)["dedupe_retention_days"] = 2.0 }, KindBelowFloor, FeatureDedupe},
		{"days 3", func(r *messages.FeatureNegotiationResponseFrame) { dedupe(r)["dedupe_retention_days"] = 3.0 }, "", ""},
		{"permanent without days", func(r *messages.FeatureNegotiationResponseFrame) {
			dedupe(r)["mode"] = "permanent"
			delete(dedupe(r), "dedupe_retention_days")
		}, "", ""},
		{"max_payload absent", func(r *messages.FeatureNegotiationResponseFrame) { delete(r.Supported, FeatureMaxPayload) }, "", ""},
		{"max_payload invalid", func(r *messages.FeatureNegotiationResponseFrame) {
			r.Supported[FeatureMaxPayload].Params["inline_bytes"] = 0.0
		}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := goodResponse()
			tc.edit(r)
			s, reason := Validate(r)
			if tc.kind == "" {
				if reason != nil {
					t.Fatalf("refused: %+v", reason)
				}
				return
			}
			if reason == nil || reason.Kind != tc.kind || reason.Feature != tc.feature || reason.Detail == "" {
				t.Fatalf("reason = %+v, session %+v; want %s/%s", reason, s, tc.kind, tc.feature)
			}
		})
	}

	s, _ := Validate(goodResponse())
	if s.DedupeMode != ModeRetentionScoped || s.DedupeRetentionDays != 365 || s.ConnectionPolicy != "prefer_newest" ||
		s.MaxPayloadBytes != 65536 || len(s.Features) != 3 || len(s.Warnings) != 0 {
		t.Fatalf("session = %+v", s)
	}
	r := goodResponse()
	r.Supported[FeatureMaxPayload].Params["inline_bytes"] = 12.0
	r.Supported[FeatureConcurrent].Params["default_policy"] = "whatever"
	r.Supported["member_keypair_rotated_event"] = messages.Feature{Params: messages.FeatureParams{"version": 1.0}}
	s, _ = Validate(r)
	if s.MaxPayloadBytes != DefaultMaxPayloadBytes || len(s.Warnings) != 2 || s.ConnectionPolicy != "" ||
		len(s.Features) != 2 || len(s.Advertised) != 4 {
		t.Fatalf("session with bad optional params = %+v", s)
	}
}

func TestNegotiationError(t *testing.T) {
	long := messages.CloseReason{Kind: KindUnavailable, Feature: strings.Repeat("x", 200)}
	if r := CompactReason(long); len(r) > 123 || r != `{"kind":"feature_unavailable"}` {
		t.Fatalf("compact reason %q", r)
	}
	var err error = &NegotiationError{Reason: messages.CloseReason{Kind: KindBelowFloor, Feature: FeatureDedupe, Detail: "d"}}
	var ne *NegotiationError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), "--legacy-broker") || !strings.Contains(err.Error(), KindBelowFloor) {
		t.Fatalf("error %q", err)
	}
}

func TestDecodeBrokerFrame(t *testing.T) {
	for raw, want := range map[string]string{
		`{"type":"ack","id":"a","messageId":"m","queued":true}`:             "*messages.AckFrame",
		`{"type":"push","messageId":"m","ciphertext":"x"}`:                  "*messages.PushFrame",
		`{"type":"peers_list","peers":[],"_reqId":"r"}`:                     "*messages.PeersListFrame",
		`{"type":"error","code":"no_hello","message":"m"}`:                  "*messages.ErrorFrame",
		`{"type":"hello_ack","presenceId":"p"}`:                             "*messages.HelloAckFrame",
		`{"type":"feature_negotiation_response","supported":{}}`:            "*messages.FeatureNegotiationResponseFrame",
		`{"type":"feature_negotiation_failed","close_reason":{"kind":"k"}}`: "*messages.FeatureNegotiationFailedFrame",
		`{"type":"state_result","key":"k"}`:                                 "*messages.StateResultFrame",
		`{"type":"node_list","nodes":[],"stale_after_ms":90000}`:            "*messages.NodeListFrame",
		`{"type":"graph_result","rows":[]}`:                                 "*wsclient.UnknownFrame",
	} {
		f, err := DecodeBrokerFrame([]byte(raw))
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if got := strings.TrimSpace(typeName(f)); got != want {
			t.Errorf("%s: %s, want %s", raw, got, want)
		}
	}
	if u, _ := DecodeBrokerFrame([]byte(`{"type":"graph_result"}`)); u.(*UnknownFrame).Type != "graph_result" {
		t.Errorf("unknown frame %+v", u)
	}
	for _, raw := range []string{`not json`, `{}`, `{"type":"ack","queued":"yes"}`} {
		var fe *messages.FrameError
		if _, err := DecodeBrokerFrame([]byte(raw)); !errors.As(err, &fe) || fe.Code != messages.FrameInvalidJSON {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

// TestBackoff: A14's schedule — 500 ms doubling to a 30 s cap, ±25 %
// jitter (never above the cap), reset on success.
func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		rnd  float64
		want []time.Duration
	}{
		{"no jitter", 0.5, []time.Duration{500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
			16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}},
		{"-25%", 0, []time.Duration{375 * ms, 750 * ms, 1500 * ms, 3 * time.Second, 6 * time.Second,
			12 * time.Second, 22500 * ms, 22500 * ms}},
		{"+25%", 1, []time.Duration{625 * ms, 1250 * ms, 2500 * ms, 5 * time.Second, 10 * time.Second,
			20 * time.Second, 30 * time.Second, 30 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBackoff(func() float64 { return tc.rnd })
			for i, want := range tc.want {
				if got := b.Next(); got != want {
					t.Fatalf("attempt %d: %s, want %s", i, got, want)
				}
			}
			if b.Attempt() != len(tc.want) {
				t.Fatalf("attempts %d", b.Attempt())
			}
			b.Reset()
			if got := b.Next(); got != tc.want[0] {
				t.Fatalf("after reset: %s, want %s", got, tc.want[0])
			}
		})
	}
	b := NewBackoff(nil) // real randomness stays in range, also after many attempts
	for i := range 200 {
		d := b.Next()
		lo := min(BackoffInitial<<min(i, 10), BackoffMax)
		if d < time.Duration(float64(lo)*0.75) || d > BackoffMax || d > time.Duration(float64(lo)*1.25) {
			t.Fatalf("attempt %d: %s out of range for base %s", i, d, lo)
		}
	}
}

// TestBreaker: opens after 5 consecutive failures, allows a half-open probe
// every 30 s, closes on success.
func TestBreaker(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	type step struct {
		advance time.Duration
		op      string // allow, fail, ok
		allow   bool   // result of allow
		state   string // state after the op
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"four failures keep it closed", []step{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed},
			{0, "fail", false, BreakerClosed}, {0, "allow", true, BreakerClosed},
		}},
		{"a success resets the count", []step{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed},
			{0, "fail", false, BreakerClosed}, {0, "ok", false, BreakerClosed}, {0, "fail", false, BreakerClosed},
			{0, "allow", true, BreakerClosed},
		}},
		{"open, probe, close", []step{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed},
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerOpen},
			{0, "allow", false, BreakerOpen}, {29 * time.Second, "allow", false, BreakerOpen},
			{time.Second, "allow", true, BreakerHalfOpen},
			{0, "allow", false, BreakerHalfOpen}, // one probe at a time
			{0, "ok", false, BreakerClosed}, {0, "allow", true, BreakerClosed},
		}},
		{"failed probe reopens for a full cooldown", []step{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed},
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerOpen},
			{30 * time.Second, "allow", true, BreakerHalfOpen}, {5 * time.Second, "fail", false, BreakerOpen},
			{29 * time.Second, "allow", false, BreakerOpen}, {time.Second, "allow", true, BreakerHalfOpen},
		}},
		{"a probe that never reports allows another after 30 s", []step{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed},
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerOpen},
			{30 * time.Second, "allow", true, BreakerHalfOpen}, {10 * time.Second, "allow", false, BreakerHalfOpen},
			{20 * time.Second, "allow", true, BreakerHalfOpen},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBreaker(clock)
			for i, s := range tc.steps {
				now = now.Add(s.advance)
				switch s.op {
				case "allow":
					if got := b.Allow(); got != s.allow {
						t.Fatalf("step %d: Allow = %v", i, got)
					}
				case "fail":
					b.Failure()
				case "ok":
					b.Success()
				}
				if got := b.State(); got != s.state {
					t.Fatalf("step %d (%s): state %s, want %s", i, s.op, got, s.state)
				}
			}
		})
	}
	b := NewBreaker(clock)
	for range BreakerThreshold {
		b.Failure()
	}
	if b.RetryIn() != 30*time.Second || b.Failures() != 5 {
		t.Fatalf("RetryIn %s, failures %d", b.RetryIn(), b.Failures())
	}
	now = now.Add(31 * time.Second)
	if b.RetryIn() != 0 {
		t.Fatalf("RetryIn after cooldown %s", b.RetryIn())
	}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
