// Package integration holds end-to-end tests of the claudemesh daemon. They
// build the real claudemesh binary once (TestMain), run it as child
// processes against per-test daemon and config directories, and talk to it
// the way clients do: HTTP over the Unix socket and the bearer-token
// loopback TCP port, and the operator CLI. Where a test needs a row in a
// state only the (not yet written) dispatcher would produce, it stops the
// daemon and edits outbox.db with database/sql, then starts it again.
//
// Run with:
//
//	go test -count=1 ./integration/
//
// Nothing here is skipped, under CI or elsewhere.
package integration
