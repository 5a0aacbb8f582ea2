// Package messages holds the typed values that cross a boundary in
// claudemesh: actor messages (always pointer structs), the IPC request and
// response bodies shared by the daemon's HTTP server and the CLI client, and
// the broker wire frames both ways (the send frame is what the daemon stores
// in its outbox) with their one decoder, DecodeFrame.
//
// It also owns the pure functions that give those values meaning at the
// boundary: validation of a send request (phase A of the delivery contract)
// and of each feature's input, the request fingerprint, peer-name
// resolution, the mail header and its receipts, contact policies, the audit
// chain's hash. Nothing here does I/O.
package messages
