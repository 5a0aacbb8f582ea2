// Package messages holds the typed values that cross a boundary in
// claudemesh: actor messages (always pointer structs), the IPC request and
// response bodies shared by the daemon's HTTP server and the CLI client, and
// the broker wire frames the daemon stores in its outbox.
//
// It also owns the pure functions that give those values meaning at the
// boundary: validation of a send request (phase A of the delivery contract)
// and the request fingerprint. Nothing here does I/O.
package messages
