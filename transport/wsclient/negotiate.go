package wsclient

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Feature names (spec §15.1), and member_directory, our broker's own: asked
// for, it makes the peer lists carry the mesh's members that are not
// connected (peerRole "member", status "offline"), so that a display name
// resolves against every member (messages.ResolvePeer). The upstream broker
// does not advertise it; the lists are then the connected peers alone.
const (
	FeatureDedupe          = "client_message_id_dedupe"
	FeatureConcurrent      = "concurrent_connection_policy"
	FeatureMaxPayload      = "max_payload"
	FeatureMemberDirectory = "member_directory"
)

// Abilities are our broker's abilities beyond the delivery contract: the
// shared data (state, memory, skills, topics), fenced locks, the list of
// the mesh's nodes, file reservations and the drain of held messages,
// advertised beside the delivery features so that a client tells it from
// the upstream broker, which advertises none of them. The daemon records
// those advertised at version 1 (Session.Abilities).
var Abilities = []string{AbilityHeld, AbilityLocks, "memory", AbilityNodes, AbilityReservations, "skills", "state", "topics"}

// The abilities the daemon checks before it asks: drain_held, list_nodes,
// the lock frames and the reservation frames.
const (
	AbilityHeld         = "held"
	AbilityNodes        = "nodes"
	AbilityLocks        = "locks"
	AbilityReservations = "reservations"
)

// Close-reason kinds (spec §15.3).
const (
	KindUnavailable  = "feature_unavailable"
	KindParamInvalid = "feature_param_invalid"
	KindBelowFloor   = "feature_param_below_floor"
)

// Dedupe modes of client_message_id_dedupe.
const (
	ModeRetentionScoped = "retention_scoped"
	ModePermanent       = "permanent"
)

// Negotiation constants.
const (
	// CloseFeatureUnavailable is the close code the daemon sends when the
	// negotiation fails (spec §15.3).
	CloseFeatureUnavailable = 4010
	// MinDedupeRetentionDays is the daemon's hard floor (spec §4.11).
	MinDedupeRetentionDays = 3
	// DefaultMaxPayloadBytes is the upstream broker's MAX_MESSAGE_BYTES,
	// used when max_payload is not negotiated (legacy, or invalid params).
	DefaultMaxPayloadBytes = 65536
	// MinPayloadBytes is the lower bound of max_payload.inline_bytes.
	MinPayloadBytes = 1024
	// PermanentMaxAge is [outbox] max_age_hours_default (168 h) and
	// PermanentMaxAgeCap its cap (720 h) in permanent mode (spec §4.11).
	PermanentMaxAge    = 168 * time.Hour
	PermanentMaxAgeCap = 720 * time.Hour
)

// Required and Optional are the features the daemon asks for.
var (
	Required = []string{FeatureDedupe, FeatureConcurrent}
	Optional = []string{FeatureMaxPayload, FeatureMemberDirectory}
)

// Session is what the hello and the feature negotiation established.
type Session struct {
	PresenceID        string
	MemberDisplayName string
	// Legacy is true when the connection was made with Config.Legacy: no
	// negotiation happened and the broker guarantees nothing beyond the
	// upstream protocol (no dedupe); the daemon's outbox is the only
	// idempotency layer.
	Legacy bool
	// Features are the negotiated features that passed validation, sorted.
	Features []string
	// Advertised are all feature names the broker advertised, sorted.
	Advertised []string
	// DedupeMode is ModeRetentionScoped or ModePermanent ("" when legacy).
	DedupeMode string
	// DedupeRetentionDays is D (retention_scoped only).
	DedupeRetentionDays int
	// FirstSend is true when the broker advertised
	// client_message_id_dedupe's first_send: a send frame may say it is its
	// id's first attempt (messages.SendFrame.FirstSend), which spares the
	// broker a dedupe read.
	FirstSend bool
	// ConnectionPolicy is concurrent_connection_policy.default_policy ("" if
	// absent or invalid).
	ConnectionPolicy string
	// MaxPayloadBytes is max_payload.inline_bytes, else
	// DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// MemberDirectory is true when the broker advertised member_directory:
	// its peer lists include the members not connected. (Not one of
	// Features, which are the delivery contract's.)
	MemberDirectory bool
	// Abilities are the Abilities the broker advertised at version 1,
	// sorted. (Not one of Features either.)
	Abilities []string
	// Warnings are optional parameters that were missing or invalid and
	// replaced by defaults (feature_optional_param_invalid, spec §15.2).
	Warnings []string
	// Response is the broker's negotiation response (nil when legacy).
	Response *messages.FeatureNegotiationResponseFrame
}

// MaxAge is the outbox max age derived from the negotiated dedupe window
// (spec §4.11 with the A16 clamp); 168 h in legacy mode.
func (s *Session) MaxAge() time.Duration {
	if s.Legacy {
		return PermanentMaxAge
	}
	return MaxAgeFor(s.DedupeMode, s.DedupeRetentionDays, PermanentMaxAge)
}

// MaxAgeFor computes the outbox max age (spec §4.11, locked v0.9.0 rule):
// permanent mode → permanentDefault (0: 168 h) capped at 720 h;
// retention_scoped with D days → max(72, 24·D − max(24, ⌈2.4·D⌉)) hours,
// clamped to at most 24·D − 24 hours so a retry always stays strictly inside
// the broker's dedupe window (A16: D = 3 gives 48 h, not 72 h). ⌈2.4·D⌉ is
// computed in integers as (12·D + 4) / 5. D < 1 gives 0.
func MaxAgeFor(mode string, days int, permanentDefault time.Duration) time.Duration {
	if mode == ModePermanent {
		if permanentDefault <= 0 {
			permanentDefault = PermanentMaxAge
		}
		return min(permanentDefault, PermanentMaxAgeCap)
	}
	if days < 1 {
		return 0
	}
	d := int64(days)
	safety := max(24, (12*d+4)/5)
	hours := max(72, d*24-safety)
	hours = min(hours, d*24-24)
	return time.Duration(hours) * time.Hour
}

// NegotiationError is a failed feature negotiation: the broker lacks (or
// advertises unusable parameters for) a feature the daemon requires. It is
// not transient: the same broker will answer the same way, so the daemon
// refuses the broker instead of retrying.
type NegotiationError struct {
	Reason messages.CloseReason
	// Response is the broker's answer; nil when it did not answer.
	Response *messages.FeatureNegotiationResponseFrame
}

func (e *NegotiationError) Error() string {
	msg := fmt.Sprintf("broker feature negotiation failed (%s, feature %s)", e.Reason.Kind, e.Reason.Feature)
	if e.Reason.Detail != "" {
		msg += ": " + e.Reason.Detail
	}
	return msg + "; this broker cannot guarantee exactly-once delivery. To use it anyway with daemon-side " +
		"idempotency only, start the daemon with --legacy-broker (or set [features] legacy_broker = true)"
}

// CompactReason is the 4010 close reason: {"kind":…,"feature":…}, at most
// 123 bytes (the detail goes in the feature_negotiation_failed frame).
func CompactReason(r messages.CloseReason) string {
	b, _ := json.Marshal(struct {
		Kind    string `json:"kind"`
		Feature string `json:"feature"`
	}{r.Kind, r.Feature})
	if len(b) > 123 {
		b, _ = json.Marshal(struct {
			Kind string `json:"kind"`
		}{r.Kind})
	}
	return string(b)
}

// Validate checks a negotiation response against the daemon's requirements
// (spec §15.2) and returns the negotiated session fields, or the close
// reason of the failure.
func Validate(resp *messages.FeatureNegotiationResponseFrame) (*Session, *messages.CloseReason) {
	s := &Session{Response: resp, MaxPayloadBytes: DefaultMaxPayloadBytes}
	for name := range resp.Supported {
		s.Advertised = append(s.Advertised, name)
	}
	slices.Sort(s.Advertised)
	fail := func(kind, feature, format string, args ...any) (*Session, *messages.CloseReason) {
		return nil, &messages.CloseReason{Kind: kind, Feature: feature, Detail: fmt.Sprintf(format, args...)}
	}
	for _, name := range Required {
		if slices.Contains(resp.MissingRequired, name) {
			return fail(KindUnavailable, name, "the broker lists %s in missing_required", name)
		}
		if _, ok := resp.Supported[name]; !ok {
			return fail(KindUnavailable, name, "the broker does not advertise %s", name)
		}
	}

	// client_message_id_dedupe
	p := resp.Supported[FeatureDedupe].Params
	if v, ok := intParam(p, "version"); !ok || v != 1 {
		return fail(KindUnavailable, FeatureDedupe, "unknown params.version %v", p["version"])
	}
	mode, _ := p["mode"].(string)
	if mode != ModeRetentionScoped && mode != ModePermanent {
		return fail(KindUnavailable, FeatureDedupe, "unknown mode %v", p["mode"])
	}
	if fp, _ := p["request_fingerprint"].(bool); !fp {
		return fail(KindUnavailable, FeatureDedupe, "request_fingerprint is %v, not true", p["request_fingerprint"])
	}
	s.DedupeMode = mode
	s.FirstSend, _ = p["first_send"].(bool)
	if mode == ModeRetentionScoped {
		days, ok := intParam(p, "dedupe_retention_days")
		switch {
		case !ok:
			return fail(KindParamInvalid, FeatureDedupe, "dedupe_retention_days is %v, not an integer", p["dedupe_retention_days"])
		case days < 1:
			return fail(KindParamInvalid, FeatureDedupe, "dedupe_retention_days %d is out of bounds", days)
		case days < MinDedupeRetentionDays:
			return fail(KindBelowFloor, FeatureDedupe, "dedupe_retention_days %d is below the floor of %d", days, MinDedupeRetentionDays)
		}
		s.DedupeRetentionDays = int(days)
	}
	s.Features = append(s.Features, FeatureDedupe)

	// concurrent_connection_policy
	p = resp.Supported[FeatureConcurrent].Params
	if v, ok := intParam(p, "version"); !ok || v != 1 {
		return fail(KindUnavailable, FeatureConcurrent, "unknown params.version %v", p["version"])
	}
	if raw, present := p["default_policy"]; present {
		switch pol, _ := raw.(string); pol {
		case "prefer_newest", "prefer_oldest", "allow_concurrent":
			s.ConnectionPolicy = pol
		default:
			s.Warnings = append(s.Warnings, fmt.Sprintf("feature_optional_param_invalid{feature=%s,param=default_policy,reason=unknown value %v}", FeatureConcurrent, raw))
		}
	}
	s.Features = append(s.Features, FeatureConcurrent)

	// max_payload (optional)
	if f, ok := resp.Supported[FeatureMaxPayload]; ok {
		p = f.Params
		if v, ok := intParam(p, "version"); !ok || v != 1 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("feature_optional_param_invalid{feature=%s,param=version,reason=unknown version %v}", FeatureMaxPayload, p["version"]))
		} else if n, ok := intParam(p, "inline_bytes"); !ok || n < MinPayloadBytes || n > math.MaxInt32 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("feature_optional_param_invalid{feature=%s,param=inline_bytes,reason=%v is not an integer in [%d, 2^31)}", FeatureMaxPayload, p["inline_bytes"], MinPayloadBytes))
		} else {
			s.MaxPayloadBytes = int(n)
			s.Features = append(s.Features, FeatureMaxPayload)
		}
	}
	if f, ok := resp.Supported[FeatureMemberDirectory]; ok {
		if v, ok := intParam(f.Params, "version"); ok && v == 1 {
			s.MemberDirectory = true
		}
	}
	for _, name := range Abilities {
		if v, ok := intParam(resp.Supported[name].Params, "version"); ok && v == 1 {
			s.Abilities = append(s.Abilities, name)
		}
	}
	slices.Sort(s.Features)
	return s, nil
}

// Negotiated is what the daemon shows of the negotiation (GET /v1/version):
// the delivery features and the abilities, sorted.
func (s *Session) Negotiated() []string {
	out := slices.Concat(s.Features, s.Abilities)
	slices.Sort(out)
	return out
}

// intParam reads an integer parameter (JSON numbers decode as float64).
func intParam(p messages.FeatureParams, name string) (int64, bool) {
	switch v := p[name].(type) {
	case float64:
		if v != math.Trunc(v) || v > 1<<53 || v < -(1<<53) {
			return 0, false
		}
		return int64(v), true
	case int:
		return int64(v), true
	case int64:
		return v, true
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}
