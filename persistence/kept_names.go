package persistence

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The names a route's broker link gave last (migration 0011), kept for
// sends by name while the broker is away.

// keptName is one name as kept_names stores it: a peer's display name,
// key, member key and role, or a topic's name and id (in key).
type keptName struct {
	Name   string `json:"name"`
	Key    string `json:"key"`
	Member string `json:"member,omitempty"`
	Role   string `json:"role,omitempty"`
}

// KeepNames replaces the names of m.Kind that m.Route kept, in tx.
func (o *Outbox) KeepNames(tx *Tx, m *messages.KeepNames) error {
	var names []keptName
	switch m.Kind {
	case messages.KeptPeerNames:
		names = make([]keptName, len(m.Peers))
		for i, p := range m.Peers {
			names[i] = keptName{Name: p.DisplayName, Key: p.Pubkey, Member: p.MemberPubkey, Role: p.PeerRole}
		}
	case messages.KeptTopicNames:
		names = make([]keptName, 0, len(m.Topics))
		for name, id := range m.Topics {
			names = append(names, keptName{Name: name, Key: id})
		}
		slices.SortFunc(names, func(a, b keptName) int { return strings.Compare(a.Name, b.Name) })
	default:
		return fmt.Errorf("keep names: unknown kind %q", m.Kind)
	}
	raw, _ := json.Marshal(names) // strings always marshal
	if _, err := tx.Exec(`INSERT INTO kept_names (route, kind, names, kept_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (route, kind) DO UPDATE SET names = excluded.names, kept_at = excluded.kept_at`, m.Route, m.Kind, string(raw), m.Now); err != nil {
		return fmt.Errorf("keep names: %w", err)
	}
	return nil
}

// KeptNames returns the names route kept: nil peers or topics for a kind
// it never kept.
func (o *Outbox) KeptNames(tx *Tx, route string) (*messages.KeptNames, error) {
	var rows []struct {
		Kind  string `db:"kind"`
		Names string `db:"names"`
	}
	if err := tx.Select(&rows, `SELECT kind, names FROM kept_names WHERE route = ?`, route); err != nil {
		return nil, fmt.Errorf("read kept names: %w", err)
	}
	out := &messages.KeptNames{}
	for _, r := range rows {
		var names []keptName
		if err := json.Unmarshal([]byte(r.Names), &names); err != nil {
			return nil, fmt.Errorf("read kept names of %s: %w", route, err)
		}
		switch r.Kind {
		case messages.KeptPeerNames:
			out.Peers = make([]messages.Peer, len(names))
			for i, n := range names {
				out.Peers[i] = messages.Peer{DisplayName: n.Name, Pubkey: n.Key, MemberPubkey: n.Member, PeerRole: n.Role}
			}
		case messages.KeptTopicNames:
			out.Topics = make(map[string]string, len(names))
			for _, n := range names {
				out.Topics[n.Name] = n.Key
			}
		}
	}
	return out, nil
}

// ForgetNames deletes every name route kept.
func (o *Outbox) ForgetNames(tx *Tx, route string) error {
	if _, err := tx.Exec(`DELETE FROM kept_names WHERE route = ?`, route); err != nil {
		return fmt.Errorf("forget names: %w", err)
	}
	return nil
}
