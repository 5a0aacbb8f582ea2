// Package deploy owns running the claudemesh daemon under the operating
// system's service manager: the systemd user unit (Linux) and the launchd
// agent (macOS) that `claudemesh daemon install-service` writes, the
// commands that load and unload them, and the check that refuses a
// persistent service in CI, in a container or as root.
//
// One daemon per OS user serves every mesh, so there is one service per
// user:
//
//   - systemd: claudemesh-daemon.service in $XDG_CONFIG_HOME/systemd/user
//     (default ~/.config/systemd/user), Type=notify, logging to journald;
//   - launchd: label com.claudemesh.daemon in
//     ~/Library/LaunchAgents/com.claudemesh.daemon.plist, logging to
//     daemon.log in the daemon directory.
//
// Both run `<binary> daemon up --foreground`, where binary is the absolute
// path of the claudemesh executable that installed them.
//
// Everything is computed from explicit [Inputs] (GOOS, home, binary path,
// environment) into a [Plan] — the directories and file it would write or
// remove and the service-manager commands it would run — so a dry run and
// the tests see exactly what an install does. [Plan.Apply] carries a plan
// out; it runs the commands only when the tool is on the search path it is
// given. [Detect] takes its inputs through [Probe], for the same reason.
//
// The templates live in templates/ and are embedded in the binary.
package deploy
