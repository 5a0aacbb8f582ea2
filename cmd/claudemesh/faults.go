//go:build faults

package main

import (
	"os"
	"time"

	"github.com/claudemesh/claudemesh-go/actors"
)

// envFaultInboxPanic names a mesh whose inbox panics at its first message
// push (actors.Faults.InboxPanic). Only a binary built with `-tags faults`
// reads it: the integration test of mesh isolation builds one.
const envFaultInboxPanic = "CLAUDEMESH_FAULT_INBOX_PANIC"

// envFaultHookStall and envFaultHookLockCutoff set actors.Faults.HookStall
// (an event type) and HookLockCutoff (a duration), for the test of a hooks
// worker killed mid-row.
const (
	envFaultHookStall      = "CLAUDEMESH_FAULT_HOOK_STALL"
	envFaultHookLockCutoff = "CLAUDEMESH_FAULT_HOOK_LOCK_CUTOFF"
)

// faults are the failures the environment asks `daemon up` to inject.
func faults() *actors.Faults {
	f := &actors.Faults{InboxPanic: os.Getenv(envFaultInboxPanic), HookStall: os.Getenv(envFaultHookStall)}
	f.HookLockCutoff, _ = time.ParseDuration(os.Getenv(envFaultHookLockCutoff))
	if f.InboxPanic == "" && f.HookStall == "" && f.HookLockCutoff == 0 {
		return nil
	}
	return f
}
