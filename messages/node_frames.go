package messages

// Node frames, this broker's own (the upstream broker answers them
// unknown_message_type, and does not advertise the ability "nodes"): a
// node is a daemon's member connection to a mesh — a hello without
// sessionPubkey — whose pongs are its heartbeat. list_nodes asks for the
// mesh's nodes, answered node_list with the broker's stale threshold.

// Node frame types.
const (
	TypeListNodes = "list_nodes"
	TypeNodeList  = "node_list"
)

// Node states, computed by the broker when it lists them.
const (
	// NodeOnline is a node connected and heard from within the stale
	// threshold.
	NodeOnline = "online"
	// NodeStale is a node not heard from within the threshold without a
	// close: the replica it was connected to died, or the link hangs.
	NodeStale = "stale"
	// NodeOffline is a node whose connection closed.
	NodeOffline = "offline"
)

// ListNodesFrame asks for the mesh's nodes; the answer is *NodeListFrame.
type ListNodesFrame struct {
	Type  string `json:"type"`
	ReqID string `json:"_reqId,omitempty"`
}

// NodeInfo is one daemon of a mesh: its member key and name, the host name
// and daemon version its hello carried ("" when it sent none, as
// upstream's daemon sends no version), its state, and when it was last
// heard from and connected (RFC 3339, UTC).
type NodeInfo struct {
	Pubkey      string `json:"pubkey"`
	Name        string `json:"name"`
	Host        string `json:"host"`
	Version     string `json:"version"`
	State       string `json:"state"`
	LastSeenAt  string `json:"last_seen_at"`
	ConnectedAt string `json:"connected_at"`
}

// NodeListFrame answers list_nodes: the mesh's nodes by name, and how long
// a node may go unheard before it is stale.
type NodeListFrame struct {
	Type         string     `json:"type"`
	Nodes        []NodeInfo `json:"nodes"`
	StaleAfterMs int64      `json:"stale_after_ms"`
	ReqID        string     `json:"_reqId,omitempty"`
}

// NewNodeBrokerFrame is the decoder table, for a client, of the broker's
// node frames: a pointer to the frame struct of typ, nil for another type.
func NewNodeBrokerFrame(typ string) any {
	if typ == TypeNodeList {
		return new(NodeListFrame)
	}
	return nil
}
