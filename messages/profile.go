package messages

import (
	"fmt"
	"slices"
	"strings"
)

// Limits of POST /v1/profile, in bytes of UTF-8. Our broker checks only the
// status; it stores any text, and closes the connection (1009) on a frame
// over its read limit, as upstream's does over 64 KiB. So the daemon bounds
// every field before anything is sent: with each at its limit, made only of
// characters the frame's JSON writes as six bytes (<, >, &), set_summary
// and set_profile stay under MaxFrameBytes
// (TestProfileFramesWithinBrokerLimit), and a peer list of the 100
// presences a mesh may have stays under the daemon's read limit.
const (
	MaxProfileSummary      = 4096
	MaxProfileTitle        = 256
	MaxProfileBio          = 4096
	MaxProfileAvatar       = 2048
	MaxProfileCapabilities = 32 // entries
	MaxProfileCapability   = 64 // bytes of one entry
)

// Codes of a refused POST /v1/profile.
const (
	CodeEmptyProfile        = "empty_profile"
	CodeInvalidStatus       = "invalid_status"
	CodeProfileFieldTooLong = "profile_field_too_long"
	CodeInvalidProfileField = "invalid_profile_field"
)

// ProfileStatuses are the statuses a profile may have (spec A38).
var ProfileStatuses = []string{StatusIdle, StatusWorking, StatusDND}

// The statuses. A recipient working or dnd (do not disturb) is busy: the
// broker holds a message of priority next or low for it until it is idle
// again, and pushes only priority now.
const (
	StatusIdle    = "idle"
	StatusWorking = "working"
	StatusDND     = "dnd"
)

// Validate checks every field present against its form and limit and
// returns the names of the fields it sets (summary, status, visible,
// avatar, title, bio, capabilities, in that order). A failure is a 400
// *Error whose detail names the field and its limit.
func (p *SetProfile) Validate() ([]string, error) {
	var fields []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"summary", p.Summary != nil}, {"status", p.Status != nil}, {"visible", p.Visible != nil},
		{"avatar", p.Avatar != nil}, {"title", p.Title != nil}, {"bio", p.Bio != nil},
		{"capabilities", p.Capabilities != nil},
	} {
		if f.set {
			fields = append(fields, f.name)
		}
	}
	if len(fields) == 0 {
		return nil, badRequest(CodeEmptyProfile, "set at least one of summary, status, visible, avatar, title, bio, capabilities")
	}
	if p.Status != nil && !slices.Contains(ProfileStatuses, *p.Status) {
		return nil, badRequest(CodeInvalidStatus, "status must be idle, working or dnd, not %q", *p.Status)
	}
	for _, f := range []struct {
		name      string
		value     *string
		limit     int
		multiline bool
	}{
		{"summary", p.Summary, MaxProfileSummary, true}, {"avatar", p.Avatar, MaxProfileAvatar, false},
		{"title", p.Title, MaxProfileTitle, false}, {"bio", p.Bio, MaxProfileBio, true},
	} {
		if f.value != nil {
			if err := checkProfileText(f.name, *f.value, f.limit, f.multiline); err != nil {
				return nil, err
			}
		}
	}
	if p.Capabilities != nil {
		if err := checkCapabilities(*p.Capabilities); err != nil {
			return nil, err
		}
	}
	return fields, nil
}

// checkProfileText refuses a value over limit bytes, or with a control
// character (a newline or a tab is allowed where multiline).
func checkProfileText(name, v string, limit int, multiline bool) error {
	if len(v) > limit {
		return badRequest(CodeProfileFieldTooLong, "%s is %d bytes; the limit is %d bytes", name, len(v), limit)
	}
	if strings.ContainsFunc(v, func(r rune) bool { return isControl(r) && !(multiline && (r == '\n' || r == '\t')) }) {
		allowed := ""
		if multiline {
			allowed = " other than a newline or a tab"
		}
		return badRequest(CodeInvalidProfileField, "%s must not contain control characters%s", name, allowed)
	}
	return nil
}

// checkCapabilities refuses more than MaxProfileCapabilities entries, or an
// entry that is empty, too long or has a control character.
func checkCapabilities(caps []string) error {
	if len(caps) > MaxProfileCapabilities {
		return badRequest(CodeProfileFieldTooLong, "capabilities has %d entries; the limit is %d entries",
			len(caps), MaxProfileCapabilities)
	}
	for i, c := range caps {
		name := fmt.Sprintf("capabilities[%d]", i)
		if c == "" {
			return badRequest(CodeInvalidProfileField, "%s is empty", name)
		}
		if err := checkProfileText(name, c, MaxProfileCapability, false); err != nil {
			return err
		}
	}
	return nil
}

// OwnProfile is one mesh's part of GET /v1/profile: this daemon's member
// (or the calling session) as the mesh's broker lists it, in the field
// names POST /v1/profile takes.
type OwnProfile struct {
	Mesh         string   `json:"mesh"`
	MemberPubkey string   `json:"member_pubkey"`
	DisplayName  string   `json:"display_name"`
	Status       string   `json:"status"`
	Summary      string   `json:"summary"`
	Visible      bool     `json:"visible"`
	Avatar       string   `json:"avatar"`
	Title        string   `json:"title"`
	Bio          string   `json:"bio"`
	Capabilities []string `json:"capabilities"`
}

// OwnProfiles is the 200 body of GET /v1/profile. Failed names the meshes
// whose broker could not say, with the error code (absent when none
// failed).
type OwnProfiles struct {
	Profiles []OwnProfile      `json:"profiles"`
	Failed   map[string]string `json:"failed,omitempty"`
}
