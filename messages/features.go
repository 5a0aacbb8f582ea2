package messages

import (
	"slices"
	"sync"
)

// BrokerFeatures is what each mesh's broker connection negotiated, kept
// where GET /v1/version reads it without asking an actor (the version is
// the CLI's 100 ms detection handshake): the connection sets its mesh's on
// connect and clears it on disconnect. The zero value is ready; nil is a
// board that records nothing.
type BrokerFeatures struct {
	mu sync.RWMutex
	m  map[string][]string
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
