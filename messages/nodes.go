package messages

// The mesh's nodes on the daemon: GET /v1/nodes relays list_nodes through
// a mesh's broker connection (actors.BrokerConn), to a broker that
// advertised the ability "nodes"; against one that did not, the answer is
// 501 nodes_unsupported.

// CodeNodesUnsupported is the IPC error's code (501) when the mesh's
// broker does not list nodes.
const CodeNodesUnsupported = "nodes_unsupported"

// NodesRequest asks a mesh's broker connection for the mesh's nodes; the
// reply is *NodesReply.
type NodesRequest struct{}

// NodesReply is the reply to *NodesRequest.
type NodesReply struct {
	Nodes        []NodeInfo
	StaleAfterMs int64
	Err          error
}

// Failure returns the request's error, nil on success.
func (r *NodesReply) Failure() error { return r.Err }

// NodeList is the answer of GET /v1/nodes: the mesh's daemons, and how
// long one may go unheard before the broker calls it stale.
type NodeList struct {
	Mesh         string     `json:"mesh"`
	Nodes        []NodeInfo `json:"nodes"`
	StaleAfterMs int64      `json:"stale_after_ms"`
}
