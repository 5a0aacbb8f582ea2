package messages

// Memory frames (wire protocol §2.2), in the upstream broker's shapes,
// with what our broker adds: recall's optional tags filter and limit,
// each result's score and the remembering member's name, and forget's
// optional _reqId echoed on its ack.

// Memory frame types.
const (
	TypeRemember      = "remember"
	TypeMemoryStored  = "memory_stored"
	TypeRecall        = "recall"
	TypeMemoryResults = "memory_results"
	TypeForget        = "forget"
)

// RememberFrame stores a memory of the mesh; the answer is
// *MemoryStoredFrame, or an error frame (invalid_args) storing nothing.
type RememberFrame struct {
	Type    string   `json:"type"`
	Content string   `json:"content"`
	Tags    []string `json:"tags,omitempty"`
	ReqID   string   `json:"_reqId,omitempty"`
}

// MemoryStoredFrame answers remember with the new memory's id.
type MemoryStoredFrame struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	ReqID string `json:"_reqId,omitempty"`
}

// RecallFrame searches the mesh's memories by relevance to Query (text:
// its words, never syntax), keeping those with every tag of Tags; Limit
// bounds the results (absent: the broker's default). The answer is
// *MemoryResultsFrame.
type RecallFrame struct {
	Type  string   `json:"type"`
	Query string   `json:"query"`
	Tags  []string `json:"tags,omitempty"`
	Limit int      `json:"limit,omitempty"`
	ReqID string   `json:"_reqId,omitempty"`
}

// MemoryInfo is one memory of memory_results. RememberedBy is the
// member's pubkey; RememberedByName and Score are ours (an exact phrase
// comes first, then the higher score).
type MemoryInfo struct {
	ID               string   `json:"id"`
	Content          string   `json:"content"`
	Tags             []string `json:"tags"`
	RememberedBy     string   `json:"rememberedBy"`
	RememberedByName string   `json:"rememberedByName,omitempty"`
	RememberedAt     string   `json:"rememberedAt"`
	Score            float64  `json:"score"`
}

// MemoryResultsFrame answers recall, best match first.
type MemoryResultsFrame struct {
	Type     string       `json:"type"`
	Memories []MemoryInfo `json:"memories"`
	ReqID    string       `json:"_reqId,omitempty"`
}

// ForgetFrame deletes a memory for good; forgetting one that is gone is
// no error. The answer is an *AckFrame {id: MemoryID, messageId:
// MemoryID, queued: false}, carrying _reqId when the request did.
type ForgetFrame struct {
	Type     string `json:"type"`
	MemoryID string `json:"memoryId"`
	ReqID    string `json:"_reqId,omitempty"`
}

// newMemoryClientFrame is DecodeClientFrame's table for the memory
// requests.
func newMemoryClientFrame(typ string) any {
	switch typ {
	case TypeRemember:
		return new(RememberFrame)
	case TypeRecall:
		return new(RecallFrame)
	case TypeForget:
		return new(ForgetFrame)
	}
	return nil
}

// NewMemoryBrokerFrame is the decoder table, for a client, of the broker's
// memory answers (forget's is an ack).
func NewMemoryBrokerFrame(typ string) any {
	switch typ {
	case TypeMemoryStored:
		return new(MemoryStoredFrame)
	case TypeMemoryResults:
		return new(MemoryResultsFrame)
	}
	return nil
}
