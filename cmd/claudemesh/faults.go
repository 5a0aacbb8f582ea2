//go:build faults

package main

import (
	"os"

	"github.com/claudemesh/claudemesh-go/actors"
)

// envFaultInboxPanic names a mesh whose inbox panics at its first message
// push (actors.Faults.InboxPanic). Only a binary built with `-tags faults`
// reads it: the integration test of mesh isolation builds one.
const envFaultInboxPanic = "CLAUDEMESH_FAULT_INBOX_PANIC"

// faults are the failures the environment asks `daemon up` to inject.
func faults() *actors.Faults {
	if mesh := os.Getenv(envFaultInboxPanic); mesh != "" {
		return &actors.Faults{InboxPanic: mesh}
	}
	return nil
}
