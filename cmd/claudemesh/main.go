// Command claudemesh is the claudemesh daemon and its operator CLI.
//
// Exit codes: 0 success; 1 a generic failure (daemon already running, not
// running, I/O); 2 bad usage or configuration; 3 refused (a lock or a
// reservation another holds, a commit the guard refuses); 4 host
// fingerprint mismatch; 5 broker feature negotiation failed; 8 outbox
// integrity failure (a damaged outbox.db, a broken audit chain); 10-13
// join refused the invite link (not a link, malformed, expired, tampered).
package main

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/alecthomas/kong"

	"github.com/claudemesh/claudemesh-go/cmd/internal/hookcmd"
	"github.com/claudemesh/claudemesh-go/config"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

type cli struct {
	Daemon       daemonCmd        `cmd:"" help:"Run and operate the local daemon."`
	Broker       brokerCmd        `cmd:"" help:"Run and provision a claudemesh broker."`
	Join         joinCmd          `cmd:"" help:"Join a mesh with an invite link (ours or upstream's): check it, mint a member key, enroll it with the broker, record the mesh in config.json."`
	Send         sendCmd          `cmd:"" help:"Send a message to a peer, #topic, @group or * (through the daemon when one answers, else directly to the broker)."`
	Peers        peersCmd         `cmd:"" help:"List the peers connected to the daemon's meshes: the names and keys send takes."`
	Nodes        nodesCmd         `cmd:"" help:"List the mesh's daemons (its members' connections) with host, version, state (online, stale, offline) and when each was last heard from."`
	Inbox        inboxCmd         `cmd:"" help:"Print the messages received (the last 24 h by default; inside an agent session, that session's), and with -f those that arrive; read a thread, acknowledge a message, search."`
	Status       statusCmd        `cmd:"" help:"Show the running daemon's state (daemon status) and its agent sessions (sessions)."`
	Sessions     sessionsCmd      `cmd:"" help:"List the agent sessions registered with the daemon, each a peer of its own."`
	Profile      profileCmd       `cmd:"" help:"Show the profile peers see (status, summary, …), or set the status and summary with --status and --summary (inside an agent session, the session's)."`
	State        stateCmd         `cmd:"" help:"Get, set (with compare-and-set: --if-version) and list the mesh's shared state: small JSON values every agent of the mesh can read."`
	Topic        topicCmd         `cmd:"" help:"Create, list, join and leave the mesh's topics, and read their members and history (send to one with claudemesh send '#name')."`
	Skill        skillCmd         `cmd:"" help:"List, read, publish and remove the mesh's skills: named instructions any agent of the mesh can fetch."`
	Lock         lockCmd          `cmd:"" help:"Take, renew, release and list fenced locks the mesh's broker holds (e.g. on a file before editing it): one holder at a time across every machine, a fence token per grant."`
	Remember     rememberCmd      `cmd:"" help:"Store a memory in the mesh (with --tag): text any agent of the mesh can find with recall."`
	Recall       recallCmd        `cmd:"" help:"Search the mesh's memories by relevance (the exact phrase first; --tag to filter), with who remembered each and when."`
	Forget       forgetCmd        `cmd:"" help:"Delete a memory of the mesh for good (by the id remember or recall print)."`
	Bench        benchCmd         `cmd:"" help:"Measure throughput and latency: accepts at a daemon, end to end through a broker, or a broker alone."`
	MCP          mcpCmd           `cmd:"" name:"mcp" help:"Serve the Model Context Protocol on stdin/stdout for an AI agent (Claude Code): tools to message peers, and arriving messages pushed live."`
	Launch       launchCmd        `cmd:"" help:"Run a command (e.g. claude) as an agent session of its own: register it with the daemon, pass its token in the environment, end it when the command exits."`
	Install      installCmd       `cmd:"" help:"Register claudemesh with an agent tool."`
	Uninstall    uninstallCmd     `cmd:"" help:"Remove what install registered."`
	Hook         hookCmd          `cmd:"" help:"Receive an agent's hook event (claudemesh hook <event>: appends it to hooks.db for the daemon, never blocks the agent), or install the receiver in Claude Code's hooks."`
	Reserve      reserveCmd       `cmd:"" help:"Reserve files of a git repository by pattern (src/**, docs/*.md) across every machine of the mesh, exclusive or --shared (exit 3 when another session's reservation is in the way, naming it)."`
	Release      releaseCmd       `cmd:"" help:"Release your reservations in the repository (the patterns given, else all)."`
	Reservations reservationsCmd  `cmd:"" help:"List the repository's reservations (--all: the mesh's) with holder, kind, fence token and expiry."`
	Guard        guardCmd         `cmd:"" help:"Install (or remove) git hooks that refuse a commit or push touching files another session reserved exclusively."`
	Contacts     contactsCmd      `cmd:"" help:"Set who may send you direct messages (contacts policy open, auto, contacts_only, block_all), and list, accept or refuse the contact requests it holds."`
	Web          webCmd           `cmd:"" help:"Open the daemon's web view in a browser (with --no-open: print its one-time link): peers and sessions, inbox, outbox, locks, compose; live."`
	Version      kong.VersionFlag `help:"Print the version and exit."`
	DaemonDir    string           `name:"daemon-dir" env:"CLAUDEMESH_DAEMON_DIR" type:"path" placeholder:"DIR" help:"The daemon's directory: its socket, databases, token and log (default ~/.claudemesh/daemon)."`
	ConfigDir    string           `name:"config-dir" env:"CLAUDEMESH_CONFIG_DIR" type:"path" placeholder:"DIR" help:"The directory of config.json, the meshes joined (default ~/.claudemesh)."`
}

// exportDirs puts --daemon-dir and --config-dir in the environment, where
// config.ResolvePaths reads them — in this process and in those it starts
// (a detached daemon, a launched session's commands, an MCP server).
func (c *cli) exportDirs() error {
	for env, dir := range map[string]string{config.EnvDaemonDir: c.DaemonDir, config.EnvConfigDir: c.ConfigDir} {
		if dir == "" {
			continue
		}
		if err := os.Setenv(env, dir); err != nil {
			return err
		}
	}
	return nil
}

type brokerCmd struct {
	Up     brokerUpCmd     `cmd:"" help:"Run the broker (SQLite in --dir by default; PostgreSQL with --database-url)."`
	Mesh   brokerMeshCmd   `cmd:"" help:"Manage meshes on this broker's database."`
	Invite brokerInviteCmd `cmd:"" help:"Create a mesh's signed invite links (broker invite <slug>, the link on a line of its own), list and revoke them."`
	Member brokerMemberCmd `cmd:"" help:"List and revoke a mesh's members."`
}

type brokerMeshCmd struct {
	Create brokerMeshCreateCmd `cmd:"" help:"Create a mesh."`
}

type daemonCmd struct {
	Up               daemonUpCmd               `cmd:"" help:"Start the daemon: detached by default, attached with --foreground."`
	Down             daemonDownCmd             `cmd:"" help:"Stop the running daemon and wait for it to exit."`
	Status           daemonStatusCmd           `cmd:"" help:"Show the running daemon's state: pid, uptime, meshes, outbox, agent hooks, how many agent sessions are live."`
	Reload           daemonReloadCmd           `cmd:"" help:"Have the running daemon re-read config.toml and config.json (SIGHUP) and say whether it applied."`
	Version          daemonVersionCmd          `cmd:"" help:"Print the CLI's and the running daemon's versions."`
	Metrics          daemonMetricsCmd          `cmd:"" help:"Print the running daemon's Prometheus metrics (GET /v1/metrics)."`
	AddAgent         daemonAddAgentCmd         `cmd:"" name:"add-agent" help:"Give another agent on this machine an identity of its own on the local mesh (a member of the embedded broker's mesh), so that agents can message each other."`
	AcceptHost       daemonAcceptHostCmd       `cmd:"" name:"accept-host" help:"Record this machine as the daemon's host (after a hardware change or a deliberate copy of the daemon directory)."`
	InstallService   daemonInstallServiceCmd   `cmd:"" name:"install-service" help:"Install the daemon as a user service (systemd on Linux, launchd on macOS)."`
	UninstallService daemonUninstallServiceCmd `cmd:"" name:"uninstall-service" help:"Remove the user service that install-service created."`
	Outbox           outboxCmd                 `cmd:"" help:"Inspect and recover the daemon's outbox."`
	Audit            daemonAuditCmd            `cmd:"" help:"Read and verify the daemon's hash-chained audit log: every transition of every outbox row and every lock transition the daemon saw."`
	Inbox            daemonInboxCmd            `cmd:"" help:"Print the messages the daemon received (the last 24 h by default), and with -f those that arrive."`
	Logs             daemonLogsCmd             `cmd:"" help:"Print the end of daemon.log (a detached daemon's log), and with -f what it writes next."`
	RotateToken      daemonRotateTokenCmd      `cmd:"" name:"rotate-token" help:"Replace local-token, the bearer TCP clients present; a running daemon accepts the old one for 60 s more."`
}

type outboxCmd struct {
	List    outboxListCmd    `cmd:"" help:"List outbox rows, newest first."`
	Requeue outboxRequeueCmd `cmd:"" help:"Retire a dead or pending row and queue its payload again under a new client_message_id."`
	Drop    outboxDropCmd    `cmd:"" help:"Give up on a dead or pending row: aborted, never sent; its client_message_id stays taken."`
}

// exitError carries a process exit code. reported means the error was
// already logged where the user will find it, and main prints nothing.
type exitError struct {
	code     int
	err      error
	reported bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	if len(os.Args) > 2 && os.Args[1] == "hook" && hookcmd.Run(os.Args[2:], os.Stdin, os.Stdout, os.Stderr) {
		return // the hook receiver, which exits 0 whatever happens (hook.go)
	}
	var c cli
	parser, err := kong.New(&c,
		kong.Name("claudemesh"),
		kong.Description("Message peers across a claudemesh mesh through a durable local daemon."),
		kong.Vars{"version": version},
		kong.UsageOnError(),
		kong.Help(helpWithHint),
	)
	if err != nil {
		panic(err)
	}
	ctx, err := parser.Parse(os.Args[1:])
	if err != nil {
		parser.Errorf("%s", err)
		os.Exit(2)
	}
	err = c.exportDirs()
	if err == nil {
		stopProfile := startCPUProfile()
		err = ctx.Run()
		stopProfile()
	}
	if err != nil {
		var ee *exitError
		if !errors.As(err, &ee) {
			ee = &exitError{code: 1, err: err}
		}
		if !ee.reported {
			msg := err.Error()
			if s := sessionRefusal(err); s != "" {
				msg = s
			}
			fmt.Fprintln(os.Stderr, "claudemesh:", printableLines(msg)) // errors quote brokers' and peers' text
		}
		os.Exit(ee.code)
	}
}

// helpWithHint is kong's help, which ends the top level's with how to read
// a command's help: a command with commands of its own (daemon, broker,
// daemon outbox, …) ends with the same hint.
func helpWithHint(options kong.HelpOptions, ctx *kong.Context) error {
	if err := kong.DefaultHelpPrinter(options, ctx); err != nil {
		return err
	}
	cmd := ctx.Selected()
	if cmd == nil || options.Summary || !slices.ContainsFunc(cmd.Children, func(n *kong.Node) bool { return n.Type == kong.CommandNode }) {
		return nil
	}
	_, err := fmt.Fprintf(ctx.Stdout, "\nRun \"%s <command> --help\" for more information on a command.\n", cmd.FullPath())
	return err
}
