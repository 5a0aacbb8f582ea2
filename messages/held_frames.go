package messages

// Held frames, this broker's own (the upstream broker answers them
// unknown_message_type, and does not advertise the ability "held"). The
// broker holds a DM of priority next or low for a recipient whose status
// is working or dnd: nothing is pushed until it is idle again (wire
// protocol §2.4 step 8), which every client keeps. drain_held is how a
// client that wants to read such messages now — an agent calling
// check_messages during its turn — asks for them: the broker claims every
// row queued for the connection's keys whatever its priority, pushes each
// as it would have, and then answers held_drained with how many it pushed,
// so that the client knows every push of the drain came before the
// answer.

// Held frame types.
const (
	TypeDrainHeld   = "drain_held"
	TypeHeldDrained = "held_drained"
)

// DrainHeldFrame asks the broker to push now what it holds for the
// connection; the answer, after the pushes, is *HeldDrainedFrame.
type DrainHeldFrame struct {
	Type  string `json:"type"`
	ReqID string `json:"_reqId,omitempty"`
}

// HeldDrainedFrame answers drain_held: Pushed rows were pushed before it
// on the connection; More says the broker stopped at its batch and holds
// more (another drain_held pushes them).
type HeldDrainedFrame struct {
	Type   string `json:"type"`
	Pushed int    `json:"pushed"`
	More   bool   `json:"more,omitempty"`
	ReqID  string `json:"_reqId,omitempty"`
}

// NewHeldBrokerFrame is the decoder table, for a client, of the broker's
// held frames: a pointer to the frame struct of typ, nil for another type.
func NewHeldBrokerFrame(typ string) any {
	if typ == TypeHeldDrained {
		return new(HeldDrainedFrame)
	}
	return nil
}
