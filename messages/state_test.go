package messages

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestStateSetRequestValidate: each malformed body of POST /v1/state is
// refused with its own code.
func TestStateSetRequestValidate(t *testing.T) {
	for _, tc := range []struct {
		body string
		code string // "" valid
	}{
		{`{"key":"release","value":{"owner":"alice"}}`, ""},
		{`{"key":"k","value":null,"if_version":0}`, ""},
		{`{"key":"k","value":"` + strings.Repeat("x", MaxStateValue-2) + `"}`, ""},
		{`{"key":"k","value":"` + strings.Repeat("x", MaxStateValue-1) + `"}`, CodeStateValueTooLarge},
		{`{"key":"","value":1}`, CodeInvalidStateKey},
		{`{"key":"` + strings.Repeat("k", MaxStateKey+1) + `","value":1}`, CodeInvalidStateKey},
		{`{"key":"a\nb","value":1}`, CodeInvalidStateKey},
		{`{"key":"k"}`, CodeInvalidStateValue},
		{`{"key":"k","value":1,"if_version":-1}`, CodeInvalidIfVersion},
		{`{"key":"k","value":1,"ifVersion":1}`, CodeUnknownField},
		{`{"key":5,"value":1}`, CodeInvalidJSON},
	} {
		var req StateSetRequest
		err := DecodeJSON([]byte(tc.body), &req)
		if err == nil {
			err = req.Validate()
		}
		var me *Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%.60s: %v, want valid", tc.body, err)
		case tc.code != "" && (!errors.As(err, &me) || me.Code != tc.code || me.Detail == ""):
			t.Errorf("%.60s: %v, want %s", tc.body, err, tc.code)
		}
	}
}

// FuzzStateSetRequest: any body is either refused with a coded *Error or
// valid, and a valid one holds a key the broker takes and a value that is
// JSON within the cap.
func FuzzStateSetRequest(f *testing.F) {
	f.Add([]byte(`{"key":"k","value":{"a":1},"if_version":2,"mesh":"m"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req StateSetRequest
		err := DecodeJSON(body, &req)
		if err == nil {
			err = req.Validate()
		}
		if err != nil {
			var me *Error
			if !errors.As(err, &me) || me.Code == "" || me.Status < 400 {
				t.Fatalf("not a coded error: %v", err)
			}
			return
		}
		if CheckStateKey(req.Key) != nil || !json.Valid(req.Value) || (req.IfVersion != nil && *req.IfVersion < 0) {
			t.Fatalf("accepted %+v", req)
		}
	})
}
