package broker

import (
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// The shared-data abilities this broker advertises beside the delivery
// features, so that a client tells it from the upstream broker (which
// advertises none of them, or does not negotiate at all): state with a
// version per key and compare-and-set (set_state's if_version), memory
// with full-text recall, skills with publish_skill and remove_skill, the
// §2.7 topics, fenced locks (conn_locks.go), file reservations
// (conn_reservations.go); and nodes, the mesh's daemons
// listed with their state (list_nodes), whose stale_after_ms is the
// broker's stale threshold. Each is version 1; a client needs none of them.
const (
	FeatureState  = "state"
	FeatureMemory = "memory"
	FeatureSkills = "skills"
	FeatureTopics = "topics"
	FeatureNodes  = "nodes"
)

// addAbilities adds the shared-data abilities and nodes to an
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
	supported[FeatureReservations] = messages.Feature{Params: messages.FeatureParams{"version": 1, "fenced": true,
		"max_patterns": messages.MaxReservePatterns, "max_check_paths": messages.MaxCheckPaths}}
}
