//go:build !faults

package main

import "github.com/claudemesh/claudemesh-go/actors"

// faults: a binary built without `-tags faults` injects none.
func faults() *actors.Faults { return nil }
