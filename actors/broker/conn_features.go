package broker

import (
	"fmt"
	"slices"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// Features this broker supports (spec §15.1), and member_directory, this
// broker's own: a client that names it (require or optional) gets the
// members not connected in its peer lists (addOfflineMembers).
const (
	FeatureDedupe          = "client_message_id_dedupe"
	FeatureConcurrent      = "concurrent_connection_policy"
	FeatureMaxPayload      = "max_payload"
	FeatureMemberDirectory = "member_directory"
)

// featureFrames are the frames of feature negotiation (spec §15).
var featureFrames = frames{
	answers((*conn).negotiate),
}

// features advertises what the broker supports for this connection's mesh.
func (c *conn) features() map[string]messages.Feature {
	dedupe := messages.FeatureParams{"version": 1, "mode": c.mesh.DedupeMode, "request_fingerprint": true,
		"first_send": true}
	if c.mesh.DedupeMode == broker.DedupeRetentionScoped {
		dedupe["dedupe_retention_days"] = c.mesh.DedupeRetentionDays
	}
	supported := map[string]messages.Feature{
		FeatureDedupe:          {Params: dedupe},
		FeatureConcurrent:      {Params: messages.FeatureParams{"version": 1, "default_policy": "allow_concurrent"}},
		FeatureMaxPayload:      {Params: messages.FeatureParams{"version": 1, "inline_bytes": c.mesh.MaxPayloadBytes, "blob_bytes": c.mesh.MaxPayloadBytes}},
		FeatureMemberDirectory: {Params: messages.FeatureParams{"version": 1}},
	}
	addAbilities(supported, c.staleAfter) // conn_features.go
	return supported
}

// negotiate answers a feature_negotiation_request; a client requiring what
// the broker lacks gets feature_negotiation_failed and a 4010 close whose
// reason is the compact close_reason.
func (c *conn) negotiate(f *messages.FeatureNegotiationRequestFrame) {
	if c.legacy != nil {
		return // upstream ignores the frame types it does not know
	}
	supported := c.features()
	resp := &messages.FeatureNegotiationResponseFrame{Type: messages.TypeFeatureNegotiationResponse,
		Supported: supported, MissingRequired: []string{}}
	for _, name := range f.Require {
		if _, ok := supported[name]; !ok {
			resp.MissingRequired = append(resp.MissingRequired, name)
		}
	}
	c.directory = slices.Contains(f.Require, FeatureMemberDirectory) || slices.Contains(f.Optional, FeatureMemberDirectory)
	c.sendFrame(resp)
	if len(resp.MissingRequired) == 0 {
		return
	}
	reason := messages.CloseReason{Kind: "feature_unavailable", Feature: resp.MissingRequired[0],
		Detail: fmt.Sprintf("this broker does not support %v", resp.MissingRequired)}
	c.sendFrame(&messages.FeatureNegotiationFailedFrame{Type: messages.TypeFeatureNegotiationFailed, CloseReason: reason})
	c.link.Close(4010, fmt.Sprintf(`{"kind":%q,"feature":%q}`, reason.Kind, reason.Feature))
}

// The shared-data abilities this broker advertises beside the delivery
// features, so that a client tells it from the upstream broker (which
// advertises none of them, or does not negotiate at all): state with a
// version per key and compare-and-set (set_state's if_version), memory
// with full-text recall, skills with publish_skill and remove_skill, the
// §2.7 topics, fenced locks (conn_locks.go), file reservations
// (conn_reservations.go); nodes, the mesh's daemons
// listed with their state (list_nodes), whose stale_after_ms is the
// broker's stale threshold; and held, the drain of the messages a busy
// recipient's status holds (conn_held.go). Each is version 1; a client
// needs none of them.
const (
	FeatureState  = "state"
	FeatureMemory = "memory"
	FeatureSkills = "skills"
	FeatureTopics = "topics"
	FeatureNodes  = "nodes"
)

// addAbilities adds the shared-data abilities, nodes and held to an
// advertisement.
func addAbilities(supported map[string]messages.Feature, staleAfter time.Duration) {
	supported[FeatureState] = messages.Feature{Params: messages.FeatureParams{"version": 1, "compare_and_set": true}}
	supported[FeatureMemory] = messages.Feature{Params: messages.FeatureParams{"version": 1, "full_text": true}}
	supported[FeatureSkills] = messages.Feature{Params: messages.FeatureParams{"version": 1, "publish": true,
		"max_content_bytes": broker.MaxSkillContent}}
	supported[FeatureTopics] = messages.Feature{Params: messages.FeatureParams{"version": 1}}
	supported[FeatureLocks] = messages.Feature{Params: messages.FeatureParams{"version": 1, "fenced": true,
		"min_ttl_ms": messages.MinLockTTL.Milliseconds(), "max_ttl_ms": messages.MaxLockTTL.Milliseconds()}}
	supported[FeatureNodes] = messages.Feature{Params: messages.FeatureParams{"version": 1, "stale_after_ms": staleAfter.Milliseconds()}}
	supported[FeatureHeld] = messages.Feature{Params: messages.FeatureParams{"version": 1}}
	supported[FeatureReservations] = messages.Feature{Params: messages.FeatureParams{"version": 1, "fenced": true,
		"max_patterns": messages.MaxReservePatterns, "max_check_paths": messages.MaxCheckPaths}}
}
