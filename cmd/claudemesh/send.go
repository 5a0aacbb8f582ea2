package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/coldpath"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// Timeouts of `claudemesh send`.
const (
	// sendDaemonTimeout bounds the daemon-routed requests.
	sendDaemonTimeout = 10 * time.Second
	// sendDialTimeout bounds the cold path's connect, hello and negotiation.
	sendDialTimeout = 15 * time.Second
	// sendAckTimeout bounds the wait for the broker's ack on the cold path.
	sendAckTimeout = 15 * time.Second
	// sendPeersTimeout bounds the cold path's list_peers.
	sendPeersTimeout = 5 * time.Second
)

type sendCmd struct {
	To              string        `arg:"" help:"Recipient: a 64-hex pubkey, #topic, @group, * (everyone), a peer's display name or a pubkey prefix of at least 8 hex."`
	Message         string        `arg:"" help:"Message text."`
	Mesh            string        `placeholder:"SLUG" help:"Mesh to send on (default: the only mesh)."`
	ClientMessageID string        `name:"client-message-id" placeholder:"ID" help:"Idempotency key: sending the same id again never delivers twice (default: a fresh ULID)."`
	Priority        string        `enum:"now,next,low" default:"next" help:"Delivery priority: now, next or low."`
	Meta            string        `placeholder:"JSON" help:"A JSON object carried with the message."`
	JSON            bool          `name:"json" help:"Print the answer as one JSON object."`
	NoDaemon        bool          `name:"no-daemon" help:"Do not use a running daemon: connect to the broker directly (cold path)."`
	LegacyBroker    bool          `name:"legacy-broker" help:"Cold path: accept a broker that does not negotiate the delivery contract (the upstream broker; also [features] legacy_broker = true in config.toml). It cannot dedupe, so a retry after a lost ack may deliver twice."`
	Wait            time.Duration `placeholder:"DURATION" help:"Through the daemon: wait up to this long (e.g. 10s) for the broker to accept the message, then say so (exit 0), or that it went dead (exit 1) or is still queued (exit 3; it stays queued). With --json, print its outbox row. The cold path always waits for the broker."`
	Subject         string        `placeholder:"TEXT" help:"A subject line (at most 200 bytes), sealed with a DM like its text."`
	Thread          string        `placeholder:"ID" help:"The thread the message belongs to (default: a reply's, else none: the message starts a thread named by its client_message_id)."`
	ReplyTo         string        `name:"reply-to" placeholder:"ID" help:"The client_message_id of the message this answers; without --thread the reply joins that message's thread."`
	Importance      string        `enum:"normal,high,urgent" default:"normal" help:"How important it is: normal, high or urgent (the recipient can list by it)."`
	Ack             bool          `help:"Ask the recipient to acknowledge it (claudemesh inbox ack); claudemesh inbox awaiting-ack lists what is still waiting."`
}

// sendWaitPoll spaces the looks at the outbox row while --wait waits.
const sendWaitPoll = 25 * time.Millisecond

// usageErr is a bad-usage failure: exit 2.
func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

func (c *sendCmd) Run() error {
	direct, err := c.check()
	if err != nil {
		return err
	}
	paths, err := config.ResolvePaths()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if tok, err := mcpserver.SessionToken(); err != nil {
		return &exitError{code: 2, err: err}
	} else if tok != "" && !c.NoDaemon {
		return c.asSession(ipc.NewClient(paths.Socket()).AsSession(tok), direct)
	}
	if !c.NoDaemon {
		d, err := ipc.Detect(paths.Socket())
		var unusable *ipc.UnusableDaemonError
		if errors.As(err, &unusable) {
			fmt.Fprintf(os.Stderr, "claudemesh: %v; using the cold path\n", err)
		}
		if err == nil {
			mesh, use, err := c.daemonMesh(d)
			if err != nil {
				return err
			}
			if use {
				return c.viaDaemon(ipc.NewClient(paths.Socket()), d, mesh, direct)
			}
		}
	}
	return c.cold(paths, direct)
}

// asSession sends as the agent session this command runs in (claudemesh
// launch): sealed with its key, on its own connection. There is no cold
// path for a session: only the daemon holds its key.
func (c *sendCmd) asSession(client *ipc.Client, direct bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), sendDaemonTimeout)
	defer cancel()
	me, err := client.SessionMe(ctx)
	if err != nil {
		return fmt.Errorf("this command runs inside an agent session (%s), which the daemon does not answer for: %w", mcpserver.SessionSource(), err)
	}
	if c.Mesh != "" && c.Mesh != me.Mesh {
		return usageErr("this agent session belongs to mesh %s; --mesh %s needs a shell outside the session", me.Mesh, c.Mesh)
	}
	d, err := client.Daemon(ctx)
	if err != nil {
		return err
	}
	if err := d.Require("send", "claudemesh send"); err != nil {
		return err
	}
	return c.viaDaemon(client, d, me.Mesh, direct)
}

// check validates everything that needs neither the daemon nor the broker;
// direct reports a `to` that names a peer (display name or pubkey prefix)
// and must be resolved to a pubkey first.
func (c *sendCmd) check() (direct bool, err error) {
	to := c.To
	switch {
	case strings.TrimSpace(to) == "":
		return false, usageErr("the recipient is empty")
	case to == "*" || to[0] == '#' || to[0] == '@' || len(to) == 64 && messages.IsHex(to):
		if _, err := messages.ParseDestination(to); err != nil {
			return false, usageErr("bad recipient %q: a topic or group name is 1-64 of [A-Za-z0-9_./-]", to)
		}
	default:
		direct = true
	}
	if c.Meta != "" && !json.Valid([]byte(c.Meta)) {
		return false, usageErr("--meta is not valid JSON")
	}
	if _, err := c.request("*").Validate(); err != nil {
		return false, usageErr("%v", err)
	}
	return direct, nil
}

// request is the send request to `to`.
func (c *sendCmd) request(to string) *messages.SendRequest {
	msg := c.Message
	req := &messages.SendRequest{To: to, Message: &msg, Priority: c.Priority, ClientMessageID: c.ClientMessageID, Mesh: c.Mesh,
		Subject: c.Subject, ThreadID: c.Thread, ReplyToID: c.ReplyTo, Importance: c.Importance, AckRequired: c.Ack}
	if c.Meta != "" {
		req.Meta = json.RawMessage(c.Meta)
	}
	return req
}

// daemonMesh decides whether the answering daemon takes this send and on
// which mesh. A daemon that cannot take sends or is not attached to the
// mesh asked for is passed over, with a note, for the cold path. An
// upstream daemon that does not say which meshes it serves (no health
// feature) is given the send with --mesh as asked: it picks its only mesh,
// or refuses.
func (c *sendCmd) daemonMesh(d *ipc.Daemon) (mesh string, use bool, err error) {
	if !d.Offers("send") {
		fmt.Fprintf(os.Stderr, "claudemesh: the running %s does not offer the \"send\" ipc feature; using the cold path\n", d)
		return "", false, nil
	}
	if d.Meshes == nil {
		return c.Mesh, true, nil
	}
	slugs := make([]string, len(d.Meshes))
	for i, m := range d.Meshes {
		slugs[i] = m.Mesh
	}
	switch {
	case c.Mesh != "" && slices.Contains(slugs, c.Mesh):
		return c.Mesh, true, nil
	case c.Mesh != "":
		attach := "a restart"
		if d.PID != 0 {
			attach = fmt.Sprintf("`kill -HUP %d` or a restart", d.PID)
		}
		fmt.Fprintf(os.Stderr, "claudemesh: the running %s is not attached to mesh %s (it serves: %s); "+
			"using the cold path (%s attaches a newly joined mesh)\n", d, c.Mesh, listOrNone(slugs), attach)
		return "", false, nil
	case messages.DefaultMesh(d.Meshes) != "":
		return messages.DefaultMesh(d.Meshes), true, nil
	case len(slugs) == 0:
		fmt.Fprintf(os.Stderr, "claudemesh: the running %s serves no mesh; using the cold path\n", d)
		return "", false, nil
	}
	return "", false, usageErr("the daemon serves several meshes (%s): name one with --mesh", strings.Join(slugs, ", "))
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// viaDaemon sends through POST /v1/send of d. A peer's name is resolved
// here when d lists peers, so that the request names the key; a daemon that
// does not list them, or whose broker is away (503 broker_unavailable), is
// given the name to resolve itself (ours from the last peer list it had).
func (c *sendCmd) viaDaemon(client *ipc.Client, d *ipc.Daemon, mesh string, direct bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), sendDaemonTimeout)
	defer cancel()
	if c.Wait > 0 {
		if err := client.Require(ctx, d, "outbox", "send --wait (it follows the message's outbox row)"); err != nil {
			return usageErr("%v", err)
		}
	}
	if c.Subject != "" || c.Thread != "" || c.Importance != messages.ImportanceNormal || c.Ack {
		if err := d.Require("mail", "send --subject, --thread, --importance and --ack"); err != nil {
			return usageErr("%v", err)
		}
	}
	to := c.To
	if direct && d.Offers("peers") {
		var err error
		if to, err = c.resolveThrough(ctx, client, d, mesh); err != nil {
			return err
		}
	}
	req := c.request(to)
	req.Mesh = mesh
	res, err := client.Send(ctx, req, "")
	var ce *ipc.SendConflictError
	switch {
	case errors.As(err, &ce):
		if c.JSON {
			os.Stdout.Write(append(withDaemon(ce.Body, d), '\n'))
		}
		return err
	case err != nil:
		return err
	}
	if c.Wait > 0 {
		cid := req.ClientMessageID
		if res.Duplicate != nil {
			cid = res.Duplicate.ClientMessageID
		} else if res.Accepted != nil {
			cid = res.Accepted.ClientMessageID
		}
		return c.waitDone(client, d, mesh, cid, c.target(to))
	}
	if c.JSON {
		_, err := os.Stdout.Write(append(withDaemon(res.Body, d), '\n'))
		return err
	}
	if res.Duplicate != nil {
		fmt.Printf("already delivered (duplicate) %s to %s broker_message_id %s\n",
			res.Duplicate.ClientMessageID, c.target(to), orUnknown(res.Duplicate.BrokerMessageID))
		return nil
	}
	fmt.Printf("%s %s to %s\n", res.Accepted.Status, res.Accepted.ClientMessageID, c.target(to))
	return nil
}

// resolveThrough resolves the peer's name c.To against d's peer list of
// mesh (messages.ResolveRecipient; a member of d's own is not a recipient
// of one of its names); a broker away leaves the name for d to resolve.
func (c *sendCmd) resolveThrough(ctx context.Context, client *ipc.Client, d *ipc.Daemon, mesh string) (string, error) {
	list, err := meshPeers(ctx, client, mesh)
	var me *messages.Error
	switch {
	case errors.As(err, &me) && me.Code == messages.CodeBrokerUnavailable:
		return c.To, nil
	case err != nil:
		return "", fmt.Errorf("cannot resolve %q through the daemon's peer list of mesh %s: %w", c.To, mesh, err)
	}
	own := func(key string) bool {
		return slices.ContainsFunc(d.Meshes, func(m messages.MeshInfo) bool { return strings.EqualFold(m.MemberPubkey, key) })
	}
	return messages.ResolveRecipient(c.To, mesh, list, own)
}

// waitDone follows the outbox row of cid sent on mesh for --wait: done
// (the broker has it), dead or aborted (it will not be sent: exit 1), or
// still queued when the wait runs out (exit 3).
func (c *sendCmd) waitDone(client *ipc.Client, d *ipc.Daemon, mesh, cid, target string) error {
	deadline := time.Now().Add(c.Wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), sendDaemonTimeout)
		row, err := client.OutboxRow(ctx, mesh, cid)
		cancel()
		if err != nil {
			return err
		}
		if row == nil {
			return fmt.Errorf("no outbox row for %s", cid)
		}
		final := row.Status == messages.StatusDone || row.Status == messages.StatusDead || row.Status == messages.StatusAborted
		if final || time.Now().After(deadline) {
			if c.JSON {
				if err := printWithDaemon(row, d); err != nil {
					return err
				}
			}
			switch {
			case row.Status == messages.StatusDone:
				if !c.JSON {
					fmt.Printf("delivered %s to %s: the broker accepted it as %s\n", cid, target, orUnknown(row.BrokerMessageID))
				}
				return nil
			case row.Status == messages.StatusDead:
				return fmt.Errorf("%s to %s will not be sent: it is dead (%s); see claudemesh daemon outbox list --failed",
					cid, target, orUnknown(row.LastError))
			case final:
				return fmt.Errorf("%s to %s will not be sent: it was aborted by an operator", cid, target)
			}
			why := ""
			if row.LastError != nil {
				why = "; last error: " + *row.LastError
			}
			return &exitError{code: 3, err: fmt.Errorf("%s to %s is still %s after %s (attempts %d%s); it stays queued and goes out when it can",
				cid, target, row.Status, c.Wait, row.Attempts, why)}
		}
		time.Sleep(sendWaitPoll) // poll interval: the row is read again
	}
}

// target is how the recipient is named in output: as given, plus the key it
// resolved to.
func (c *sendCmd) target(resolved string) string {
	if resolved == c.To {
		return c.To
	}
	return fmt.Sprintf("%s (%.16s…)", c.To, resolved)
}

// orUnknown is what output shows for a value the daemon or broker did not
// give.
func orUnknown(s *string) string { return cmp.Or(messages.Deref(s), "unknown") }

// coldMembership picks the mesh of a cold send from config.json.
func (c *sendCmd) coldMembership(paths config.Paths) (*config.Membership, error) {
	ms, err := paths.LoadMemberships()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	slugs := make([]string, len(ms))
	infos := make([]messages.MeshInfo, len(ms))
	for i, m := range ms {
		slugs[i] = m.Slug
		infos[i] = messages.MeshInfo{Mesh: m.Slug, Agent: m.LocalAgent()}
	}
	name := c.Mesh
	switch {
	case name != "":
	case len(ms) == 1:
		return &ms[0], nil
	case len(ms) == 0:
		return nil, usageErr("%s records no mesh: join one with `claudemesh join <invite-url>`", paths.ConfigFile())
	default: // as the daemon picks: another agent's identity is never the default
		if name = messages.DefaultMesh(infos); name == "" {
			return nil, usageErr("%s records several meshes (%s): name one with --mesh", paths.ConfigFile(), strings.Join(slugs, ", "))
		}
	}
	for i := range ms {
		if ms[i].Slug == name {
			return &ms[i], nil
		}
	}
	return nil, usageErr("%s records no mesh %s (it records: %s)", paths.ConfigFile(), name, listOrNone(slugs))
}

// coldOutcome is what --json prints on the cold path: the broker's ack.
type coldOutcome struct {
	Via string `json:"via"`
	*messages.AckFrame
}

// cold sends without the daemon (package coldpath).
func (c *sendCmd) cold(paths config.Paths, direct bool) error {
	m, err := c.coldMembership(paths)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(context.Background(), sendDialTimeout)
	defer cancel()
	legacy, err := c.legacyBroker(paths)
	if err != nil {
		return err
	}
	session, err := coldpath.Dial(dctx, m, coldpath.Options{SessionID: "cli-" + strconv.Itoa(os.Getpid()), Legacy: legacy})
	if errors.Is(err, coldpath.ErrIdentity) {
		return &exitError{code: 2, err: fmt.Errorf("%s: %w", paths.ConfigFile(), err)}
	}
	if err != nil {
		return err
	}
	defer session.Close()
	to := c.To
	if direct {
		pctx, cancel := context.WithTimeout(context.Background(), sendPeersTimeout)
		defer cancel()
		peers, err := session.Peers(pctx)
		if err != nil {
			return fmt.Errorf("cannot resolve %q on mesh %s: %w", c.To, m.Slug, err)
		}
		own := func(key string) bool { return strings.EqualFold(key, m.Pubkey) }
		if to, err = messages.ResolveRecipient(c.To, m.Slug, peers, own); err != nil {
			return err
		}
	}
	send, err := c.request(to).Validate()
	if err != nil {
		return usageErr("%v", err)
	}
	actx, cancel := context.WithTimeout(context.Background(), sendAckTimeout)
	defer cancel()
	cid, ack, err := session.Send(actx, send)
	if err != nil {
		return err
	}
	return c.report(ack, cid, to)
}

// legacyBroker is whether the cold path accepts a broker that does not
// negotiate: --legacy-broker, or [features] legacy_broker in config.toml.
func (c *sendCmd) legacyBroker(paths config.Paths) (bool, error) {
	if c.LegacyBroker {
		return true, nil
	}
	f, err := config.LoadFile(paths.ConfigTOML())
	if err != nil {
		return false, &exitError{code: 2, err: err}
	}
	return f.Features.LegacyBroker, nil
}

// report prints the broker's ack of a cold send.
func (c *sendCmd) report(ack *messages.AckFrame, cid, to string) error {
	code := ack.Code
	if code == 0 && ack.Error == "" && ack.Queued {
		code = http.StatusCreated // a broker without the extended ack
	}
	if c.JSON {
		if err := json.NewEncoder(os.Stdout).Encode(&coldOutcome{Via: "broker", AckFrame: ack}); err != nil {
			return err
		}
	}
	switch code {
	case http.StatusCreated:
		if !c.JSON {
			fmt.Printf("sent %s to %s broker_message_id %s\n", cid, c.target(to), cmp.Or(ack.BrokerMessageID, ack.MessageID, "unknown"))
		}
		return nil
	case http.StatusOK:
		if !c.JSON {
			fmt.Printf("already delivered (duplicate) %s to %s broker_message_id %s\n", cid, c.target(to), cmp.Or(ack.BrokerMessageID, ack.MessageID, "unknown"))
		}
		return nil
	case http.StatusConflict:
		return fmt.Errorf("%s: %s (client_message_id %s, broker fingerprint prefix %s, broker_message_id %s)",
			messages.CodeIdempotencyReused, ack.Conflict, cid, ack.BrokerFingerprintPrefix, cmp.Or(ack.BrokerMessageID, "unknown"))
	}
	reason := cmp.Or(ack.Error, "rejected")
	if code == 0 { // a broker without the extended ack says why in words only
		return fmt.Errorf("the broker refused %s: %s", cid, reason)
	}
	return fmt.Errorf("the broker refused %s: %s (code %d)", cid, reason, code)
}
