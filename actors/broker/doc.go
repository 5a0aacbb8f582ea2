// Package broker is the broker's actors (protoactor-go), spawned at the top
// of the actor system (that of `broker up`, or the daemon's for its embedded
// broker), each named broker/<name>:
//
//	broker/
//	├── hub        live presences per mesh: who is connected with which keys,
//	│              groups and status; resolves a send's recipients; fans pushes
//	│              out; peer list; peer_joined / peer_left (90 s grace)
//	├── accepts    group commit of the accept transaction (store.AcceptBatch);
//	│              pushes at the commit, acks once it is durable (on SQLite
//	│              after a WAL fsync a replySyncer runs beside the next batch)
//	├── acks       group commit of client_acks (store.AckDeliveries), each
//	│              held up to AckDelay for others to join
//	├── sweeper    lease redelivery on a timer; revocations every 5 s; hourly
//	│              dedupe retention, message pruning, session rows that
//	│              stopped counting and the orphan check
//	├── relay      PostgreSQL only: every RelayPoll, the deliveries that
//	│              waited unclaimed past it (a missed NOTIFY) are drained
//	│              by the connections here that take them
//	└── conn-*     one per WebSocket: hello, then the client frames of
//	               clientFrames (send: B0 → B1 → accept, client_ack,
//	               list_peers, set_*, negotiation, the shared-data
//	               requests); drains queued deliveries on hello and when
//	               the sweeper says so
//
// A conn actor answers each client frame in conn.frame: it decodes it
// (messages.DecodeClientFrame), lets only a hello or session_hello through
// until one is accepted, then looks the frame's type up in clientFrames
// (conn_frames.go) and calls its handler; a frame no entry takes is
// answered already_authenticated. Each feature's file (conn_send.go,
// conn_peers.go, conn_features.go, conn_topics.go, conn_state.go,
// conn_skills.go, conn_memory.go, conn_locks.go, conn_reservations.go,
// conn_nodes.go) declares its entries in a var of type frames, each
// answers((*conn).handler) for a handler that only reads or writes the
// store and answers, acts((*conn).handler) for one that also tells other
// actors. Adding a client frame is its struct and a case in messages'
// decoder, then one entry (a new feature: its file, and its frames listed
// in clientFrames); TestConnTakesEveryClientFrame fails on a decoded frame
// type no entry takes, and a type listed twice stops the package loading.
//
// The messages these actors exchange are defined here, not in package
// messages, because they carry store types (persistence/broker imports
// messages). The WebSocket itself belongs to transport/wsserver: the conn
// actor receives its frames as messages and queues frames on it.
//
// Decisions where the protocol is silent:
//   - Every connected identity is a recipient of its own: a member
//     connection by its member key, a session_hello connection by its
//     session key only (it never claims the member's rows). A hello with a
//     sessionPubkey (legacy CLI) receives for both keys and counts as its
//     member.
//   - `*` reaches every active member of the mesh and every live
//     session_hello connection, but the sender's keys (queued for members
//     offline); `#<id>` the same among who joined the topic with that id —
//     a session_hello connection joins as its session, any other as its
//     member (conn_topics.go) — (any other `#` target is refused:
//     topic_not_found);
//     `@group` reaches the live connections claiming the group in
//     their hello, by their own keys (group membership is not stored);
//     `@all` is `*`.
//   - A DM reaches the key it names; a DM to a session key is accepted while
//     the hub knows that session (live, or within its grace), as its member.
//   - A push goes to every live connection receiving for the recipient key,
//     except the sending connection; receivers dedupe by (sender,
//     client_message_id).
//   - A client_message_id is its sender's: B0, the rate limiter's "already
//     paid" mark and the accept key it by (mesh, sender, id), the sender
//     being the key the push carries (conn.sender: the member key, or the
//     session key of a session_hello or of a hello with a sessionPubkey).
//     Two agents or sessions using one id send two messages. A client_ack
//     naming only the client's id marks the recipient's pushed rows with
//     that id (upstream's rule); ours names the message.
//   - A recipient whose status is working or dnd is pushed only `now`
//     messages live; the rest wait in the queue until it is idle again. A
//     session's set_status and set_summary are its own (in memory, shown in
//     list_peers), not its member's.
//   - Unlike upstream, hello's memberId must be the member's id.
package broker
