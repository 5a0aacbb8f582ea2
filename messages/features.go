package messages

import (
	"slices"
	"sync"
)

// BrokerFeatures is what each mesh's broker connection negotiated, kept
// where GET /v1/version reads it without asking an actor (the version is
// the CLI's 100 ms detection handshake): the connection sets its mesh's on
// connect and clears it on disconnect. It also says which meshes' brokers
// refuse the key as revoked, which POST /v1/send reads on every request.
// The zero value is ready; nil is a board that records nothing.
type BrokerFeatures struct {
	mu sync.RWMutex
	m  map[string][]string
	// revoked are the meshes whose broker refused the daemon's key as
	// revoked (SetRevoked): the IPC server refuses their sends.
	revoked map[string]bool
}

// SetRevoked records whether mesh's broker refuses the key as revoked.
func (b *BrokerFeatures) SetRevoked(mesh string, revoked bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !revoked {
		delete(b.revoked, mesh)
		return
	}
	if b.revoked == nil {
		b.revoked = map[string]bool{}
	}
	b.revoked[mesh] = true
}

// Revoked says whether mesh's broker refused the key as revoked.
func (b *BrokerFeatures) Revoked(mesh string) bool {
	if b == nil {
		return false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.revoked[mesh]
}

// Set records mesh's features (nil: not connected).
func (b *BrokerFeatures) Set(mesh string, features []string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string][]string{}
	}
	if features == nil {
		delete(b.m, mesh)
		return
	}
	b.m[mesh] = slices.Clone(features)
}

// Of is mesh's features, nil while it is not connected.
func (b *BrokerFeatures) Of(mesh string) []string {
	if b == nil {
		return nil
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.m[mesh]
}
