package ipcserver

import (
	"net/url"
	"testing"
)

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"": true, "localhost": true, "LOCALHOST:47823": true, "127.0.0.1": true, "127.0.0.1:1": true,
		"[::1]": true, "[::1]:47823": true, "::1": true,
		"evil.example": false, "evil.example:80": false, "127.0.0.2": false, "localhost.evil.example": false,
		"0.0.0.0": false, "[::2]:1": false, "10.0.0.1": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestParseOutboxQuery(t *testing.T) {
	q, err := parseOutboxQuery(url.Values{"status": {"failed"}, "limit": {"500"}, "before": {"01M80VSJNJ4MV2YP1XZFGWCR4D"}})
	if err != nil || q.Status != "dead" || q.Limit != 500 || q.Before != "01M80VSJNJ4MV2YP1XZFGWCR4D" {
		t.Fatalf("%+v %v", q, err)
	}
	if q, err := parseOutboxQuery(url.Values{}); err != nil || q.Limit != DefaultOutboxLimit || q.Status != "" {
		t.Fatalf("defaults: %+v %v", q, err)
	}
	for _, bad := range []url.Values{{"status": {"lost"}}, {"limit": {"-1"}}, {"limit": {"501"}}, {"before": {"x"}}} {
		if _, err := parseOutboxQuery(bad); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}
