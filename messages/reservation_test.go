package messages

import (
	"errors"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages/pathglob"
)

// FuzzReserveRequest: any body is decoded and validated or refused with a
// coded 4xx, never accepted with a pattern the broker would refuse or out
// of bounds; the check request likewise with its paths.
func FuzzReserveRequest(f *testing.F) {
	f.Add([]byte(`{"repo":"git:abc","patterns":["src/**","docs/*.md"],"shared":true,"ttl_ms":30000,"wait_ms":1000,"force":true}`))
	f.Add([]byte(`{"repo":"git:abc","patterns":["{a,b}/[!x]*.go","\\!odd","/README.md"]}`))
	f.Add([]byte(`{"repo":"","patterns":["a//b","!x","[z-a]"],"ttl_ms":-5}`))
	f.Add([]byte(`{"repo":"r","paths":["src/app.py","../x","a\u0000b"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req ReserveRequest
		err := DecodeJSON(body, &req)
		if err == nil {
			err = req.Validate()
		}
		if err == nil {
			for _, p := range req.Patterns {
				if _, perr := pathglob.Parse(p); perr != nil {
					t.Fatalf("accepted the pattern %q: %v", p, perr)
				}
			}
			if req.Repo == "" || len(req.Patterns) == 0 || len(req.Patterns) > MaxReservePatterns ||
				ReservationTTL(req.TTLMs) < MinReservationTTL || ReservationTTL(req.TTLMs) > MaxReservationTTL || req.WaitMs < 0 {
				t.Fatalf("accepted %+v", req)
			}
		} else if !coded4xx(err) {
			t.Fatalf("not a coded 4xx: %v", err)
		}
		var check CheckPathsRequest
		err = DecodeJSON(body, &check)
		if err == nil {
			err = check.Validate()
		}
		if err == nil {
			for _, p := range check.Paths {
				if pathglob.CheckPath(p) != nil {
					t.Fatalf("accepted the path %q", p)
				}
			}
		} else if !coded4xx(err) {
			t.Fatalf("check: not a coded 4xx: %v", err)
		}
	})
}

func coded4xx(err error) bool {
	var me *Error
	return errors.As(err, &me) && me.Code != "" && me.Status >= 400 && me.Status <= 499
}
