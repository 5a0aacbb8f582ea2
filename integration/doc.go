// Package integration holds end-to-end tests of the claudemesh daemon. They
// build the real claudemesh binary once (TestMain), run it as child
// processes against per-test daemon and config directories, and talk to it
// the way clients do: HTTP over the Unix socket and the bearer-token
// loopback TCP port, and the operator CLI. Where a test needs a row in a
// state a working broker does not produce on demand (dead after failed
// attempts, inflight at a crash, done long ago), it stops the daemon and
// edits outbox.db with database/sql, then starts it again; the outbox's
// audit triggers call functions the persistence package registers with the
// SQLite driver, which this test binary links.
//
// Run with:
//
//	go test -count=1 ./integration/
//
// Under CI=true nothing is skipped on Linux: a test whose prerequisite is
// missing (the PostgreSQL URL, root to mount the tmpfs of
// TestDiskFull, chromium for TestWebView) fails. Elsewhere such a test
// skips, saying why. The Markdown link check, which needs no daemon, lives
// apart in integration/doclinks.
package integration
