package messages

import (
	"errors"
	"strings"
	"testing"
)

// TestLockRequestValidate: bodies the broker would refuse are refused
// with their codes; the TTL's default is 30 s.
func TestLockRequestValidate(t *testing.T) {
	for _, c := range []struct {
		req  interface{ Validate() error }
		code string
	}{
		{&LockAcquireRequest{Key: "file:src/lib.rs", Repo: "git:abc", TTLMs: 1000, WaitMs: 60000}, ""},
		{&LockAcquireRequest{Key: "k"}, ""},
		{&LockAcquireRequest{Key: ""}, CodeInvalidLockKey},
		{&LockAcquireRequest{Key: strings.Repeat("k", MaxLockKey+1)}, CodeInvalidLockKey},
		{&LockAcquireRequest{Key: "a\u0085b"}, CodeInvalidLockKey},
		{&LockAcquireRequest{Key: "k", Repo: strings.Repeat("r", MaxLockRepo+1)}, CodeInvalidLockRepo},
		{&LockAcquireRequest{Key: "k", Repo: "\xff"}, CodeInvalidLockRepo},
		{&LockAcquireRequest{Key: "k", TTLMs: 999}, CodeInvalidLockTTL},
		{&LockAcquireRequest{Key: "k", TTLMs: -1}, CodeInvalidLockTTL},
		{&LockAcquireRequest{Key: "k", TTLMs: MaxLockTTL.Milliseconds() + 1}, CodeInvalidLockTTL},
		{&LockAcquireRequest{Key: "k", WaitMs: MaxLockWait.Milliseconds() + 1}, CodeInvalidLockWait},
		{&LockRenewRequest{Key: "k", FenceToken: 1}, ""},
		{&LockRenewRequest{Key: "k"}, CodeInvalidFence},
		{&LockReleaseRequest{Key: "k"}, ""},
		{&LockReleaseRequest{Key: "k", FenceToken: -1}, CodeInvalidFence},
	} {
		err := c.req.Validate()
		var me *Error
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%+v: %v", c.req, err)
		case c.code != "" && (!errors.As(err, &me) || me.Code != c.code || me.Status != 400):
			t.Errorf("%+v: %v, want %s", c.req, err, c.code)
		}
	}
	if LockTTL(0) != DefaultLockTTL || LockTTL(1500).Milliseconds() != 1500 {
		t.Errorf("LockTTL")
	}
}

// FuzzLockAcquireRequest: any body is decoded and validated or refused
// with a coded 4xx, never accepted out of bounds.
func FuzzLockAcquireRequest(f *testing.F) {
	f.Add([]byte(`{"key":"file:src/lib.rs","repo":"git:abc","ttl_ms":30000,"wait_ms":1000,"mesh":"m"}`))
	f.Add([]byte(`{"key":"","ttl_ms":-5}`))
	f.Add([]byte(`{"key":"k\u0000","wait_ms":1e30}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req LockAcquireRequest
		err := DecodeJSON(body, &req)
		if err == nil {
			err = req.Validate()
		}
		if err != nil {
			var me *Error
			if !errors.As(err, &me) || me.Code == "" || me.Status < 400 || me.Status > 499 {
				t.Fatalf("not a coded 4xx: %v", err)
			}
			return
		}
		if CheckLockName(req.Key, req.Repo) != nil || LockTTL(req.TTLMs) < MinLockTTL || LockTTL(req.TTLMs) > MaxLockTTL ||
			req.WaitMs < 0 || req.WaitMs > MaxLockWait.Milliseconds() {
			t.Fatalf("accepted %+v", req)
		}
	})
}
