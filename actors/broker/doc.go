// Package broker is the broker's actor tree (protoactor-go):
//
//	broker (root supervisor)
//	├── hub        live presences per mesh: who is connected with which keys,
//	│              groups and status; resolves a send's recipients; fans pushes
//	│              out; peer list; peer_joined / peer_left (90 s grace)
//	├── accepts    group commit of the accept transaction (store.AcceptBatch)
//	├── acks       group commit of client_acks (store.AckDeliveries), each
//	│              held up to AckDelay for others to join
//	├── sweeper    lease redelivery on a timer; dedupe retention and the
//	│              orphan check
//	└── conn-*     one per WebSocket: hello, negotiation, send (B0 → B1 →
//	               accept), client_ack, list_peers, set_*; drains queued
//	               deliveries on hello and when the sweeper says so
//
// The messages these actors exchange are defined here, not in package
// messages, because they carry store types (persistence/broker imports
// messages). The WebSocket itself belongs to transport/wsserver: the conn
// actor receives its frames as messages and queues frames on it.
//
// Decisions where the protocol is silent:
//   - `*` and `#topic` reach every active member of the mesh but the sender
//     (queued for members offline); `@group` reaches the members with a live
//     connection claiming the group in its hello (group membership is not
//     stored); `@all` is `*`.
//   - A DM to a session pubkey is delivered to its member.
//   - Every live connection of a recipient member gets the push, except the
//     sending connection; receivers dedupe by client_message_id.
//   - A recipient whose status is working or dnd is pushed only `now`
//     messages live; the rest wait in the queue until it is idle again.
//   - Unlike upstream, hello's memberId must be the member's id.
package broker
