package messages

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestSetProfileValidate(t *testing.T) {
	big := strings.Repeat("x", 300<<10)
	for _, c := range []struct {
		name   string
		p      SetProfile
		code   string
		detail string // the detail contains this
	}{
		{"nothing set", SetProfile{Mesh: "m"}, CodeEmptyProfile, "set at least one"},
		{"bad status", SetProfile{Status: ptr("away")}, CodeInvalidStatus, `"away"`},
		{"status case", SetProfile{Status: ptr("Idle")}, CodeInvalidStatus, "idle, working or dnd"},
		{"300 KB summary", SetProfile{Summary: &big}, CodeProfileFieldTooLong, "summary is 307200 bytes; the limit is 4096 bytes"},
		{"summary one over", SetProfile{Summary: ptr(strings.Repeat("é", MaxProfileSummary/2) + "x")}, CodeProfileFieldTooLong, "summary is 4097 bytes"},
		{"title", SetProfile{Title: ptr(strings.Repeat("t", MaxProfileTitle+1))}, CodeProfileFieldTooLong, "title is 257 bytes; the limit is 256 bytes"},
		{"bio", SetProfile{Bio: ptr(strings.Repeat("b", MaxProfileBio+1))}, CodeProfileFieldTooLong, "bio is 4097 bytes; the limit is 4096"},
		{"avatar", SetProfile{Avatar: ptr(strings.Repeat("a", MaxProfileAvatar+1))}, CodeProfileFieldTooLong, "avatar is 2049 bytes; the limit is 2048"},
		{"too many capabilities", SetProfile{Capabilities: ptr(make([]string, MaxProfileCapabilities+1))}, CodeProfileFieldTooLong,
			"capabilities has 33 entries; the limit is 32"},
		{"capability too long", SetProfile{Capabilities: ptr([]string{"go", strings.Repeat("c", MaxProfileCapability+1)})},
			CodeProfileFieldTooLong, "capabilities[1] is 65 bytes; the limit is 64"},
		{"empty capability", SetProfile{Capabilities: ptr([]string{""})}, CodeInvalidProfileField, "capabilities[0] is empty"},
		{"escape in summary", SetProfile{Summary: ptr("a\x1b[2Jb")}, CodeInvalidProfileField, "summary must not contain control characters"},
		{"newline in title", SetProfile{Title: ptr("a\nb")}, CodeInvalidProfileField, "title"},
		{"DEL in capability", SetProfile{Capabilities: ptr([]string{"a\x7f"})}, CodeInvalidProfileField, "capabilities[0]"},
		{"good field, bad field", SetProfile{Summary: ptr("ok"), Bio: ptr(big)}, CodeProfileFieldTooLong, "bio is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.p.Validate()
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Code != c.code || !strings.Contains(e.Detail, c.detail) {
				t.Fatalf("got %v, want 400 %s containing %q", err, c.code, c.detail)
			}
		})
	}
}

func TestSetProfileValidateAccepts(t *testing.T) {
	p := SetProfile{Summary: ptr(strings.Repeat("s", MaxProfileSummary)), Status: ptr("dnd"), Visible: ptr(false),
		Avatar: ptr(""), Title: ptr("reviewer"), Bio: ptr("line one\n\tline two"), Capabilities: ptr([]string{})}
	fields, err := p.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"summary", "status", "visible", "avatar", "title", "bio", "capabilities"}; !slices.Equal(fields, want) {
		t.Fatalf("fields %q, want %q", fields, want)
	}
}

// TestProfileFramesWithinBrokerLimit: every field at its limit, made of
// the character the frame's JSON writes as six bytes, still makes frames
// the upstream broker takes (the daemon marshals them with json.Marshal).
func TestProfileFramesWithinBrokerLimit(t *testing.T) {
	worst := func(n int) *string { return ptr(strings.Repeat("<", n)) }
	caps := make([]string, MaxProfileCapabilities)
	for i := range caps {
		caps[i] = *worst(MaxProfileCapability)
	}
	p := SetProfile{Summary: worst(MaxProfileSummary), Status: ptr("working"), Avatar: worst(MaxProfileAvatar),
		Title: worst(MaxProfileTitle), Bio: worst(MaxProfileBio), Capabilities: &caps}
	if _, err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	reqID := strings.Repeat("9", 20)
	for _, frame := range []any{
		&SetSummaryFrame{Type: TypeSetSummary, Summary: *p.Summary},
		&SetProfileFrame{Type: TypeSetProfile, Avatar: p.Avatar, Title: p.Title, Bio: p.Bio, Capabilities: p.Capabilities, ReqID: reqID},
	} {
		b, err := json.Marshal(frame)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxFrameBytes {
			t.Errorf("%T at the limits is %d bytes, over %d", frame, len(b), MaxFrameBytes)
		}
		t.Logf("%T at the limits: %d bytes", frame, len(b))
	}
}
