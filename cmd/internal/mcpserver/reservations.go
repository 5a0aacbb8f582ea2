package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/pathglob"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// The reservation tools: file reservations by path pattern in the git
// repository the server runs in (every clone of it, on any machine of the
// mesh, shares them), taken as the session, so that the daemon renews
// them while the session lives and releases them when it ends; and
// start_session, which an agent calls first: its session, its
// reservations and its unread messages in one call.
type (
	reserveIn struct {
		Patterns    []string `json:"patterns" jsonschema:"What to reserve: gitignore-style patterns from the repository's root, e.g. src/** (a directory and everything below it), docs/*.md, *.go (at any depth), /README.md (the root's only)."`
		Shared      bool     `json:"shared,omitempty" jsonschema:"Reserve shared (others may reserve the same files shared, e.g. to read them) instead of exclusive."`
		WaitSeconds int      `json:"wait_seconds,omitempty" jsonschema:"How long to wait while others' reservations are in the way (0: answer at once; at most 600)."`
		TTLSeconds  int      `json:"ttl_seconds,omitempty" jsonschema:"How long the reservations outlive this session if it dies without releasing them (default 300)."`
		Force       bool     `json:"force,omitempty" jsonschema:"Release first the reservations in the way whose holder has been gone (not renewing) too long; their holder is told."`
	}
	reserveOut struct {
		Granted      bool             `json:"granted" jsonschema:"Whether you hold the reservations now."`
		FenceToken   int64            `json:"fence_token,omitempty" jsonschema:"The grant's fence token: it grows with every grant in the repository."`
		Patterns     []string         `json:"patterns" jsonschema:"The patterns asked for."`
		Conflicts    []reservationOut `json:"conflicts" jsonschema:"When refused: the reservations in the way."`
		Reservations []reservationOut `json:"reservations,omitempty" jsonschema:"When granted: yours."`
		Forced       []reservationOut `json:"forced,omitempty" jsonschema:"Reservations of gone holders your force released."`
	}
	reservationOut struct {
		Pattern   string `json:"pattern" jsonschema:"The reserved pattern."`
		Exclusive bool   `json:"exclusive" jsonschema:"Exclusive (no one else may reserve what it covers) or shared."`
		Holder    string `json:"holder" jsonschema:"Who holds it (display name)."`
		ExpiresAt string `json:"expires_at" jsonschema:"When it runs out unless renewed (the daemon renews its sessions')."`
		Yours     string `json:"yours,omitempty" jsonschema:"For a conflict: your pattern it overlaps."`
		Path      string `json:"path,omitempty" jsonschema:"For a conflict: a path both cover."`
		Gone      bool   `json:"gone,omitempty" jsonschema:"For a conflict: its holder has been gone too long; force would release it."`
	}
	releaseIn struct {
		Patterns []string `json:"patterns,omitempty" jsonschema:"The patterns to release, as reserved (empty: all of yours in this repository)."`
	}
	releaseOut struct {
		Released []string `json:"released" jsonschema:"The patterns released."`
	}
	reservationsIn  struct{}
	reservationsOut struct {
		Reservations []reservationOut `json:"reservations" jsonschema:"The repository's reservations, by pattern."`
	}
	startSessionIn struct {
		Patterns   []string `json:"patterns,omitempty" jsonschema:"Files to reserve for your work, as reserve_files takes them (empty: none)."`
		Shared     bool     `json:"shared,omitempty" jsonschema:"Reserve them shared instead of exclusive."`
		TTLSeconds int      `json:"ttl_seconds,omitempty" jsonschema:"How long the reservations outlive this session if it dies (default 300)."`
		Summary    string   `json:"summary,omitempty" jsonschema:"One line on what you are about to do, shown to peers."`
	}
	startSessionOut struct {
		Mesh        string            `json:"mesh" jsonschema:"The mesh you are on."`
		You         string            `json:"you" jsonschema:"Your display name: peers send to it."`
		Repo        string            `json:"repo,omitempty" jsonschema:"The repository's id (its root commit), when in one."`
		Reservation *reserveOut       `json:"reservation,omitempty" jsonschema:"The outcome of reserving patterns."`
		Inbox       *checkMessagesOut `json:"inbox" jsonschema:"Your unread messages, oldest first (now read)."`
	}
)

// reservationPaths bounds a list of reservation patterns (required: at
// least one).
func reservationPaths(s *jsonschema.Schema, required bool) {
	s.MaxItems = jsonschema.Ptr(messages.MaxReservePatterns)
	if required {
		s.MinItems = jsonschema.Ptr(1)
	}
	s.Items = &jsonschema.Schema{Type: "string", MinLength: jsonschema.Ptr(1), MaxLength: jsonschema.Ptr(pathglob.MaxPatternBytes)}
}

func (m *mcpServer) addReservationTools() {
	patterns := func(p map[string]*jsonschema.Schema, required bool) { reservationPaths(p["patterns"], required) }
	addTool(m.tools, &mcp.Tool{Name: "reserve_files", Title: "Reserve files",
		Description: "Reserve files of this git repository before editing them, by pattern (src/**, docs/*.md), so that other agents of " +
			"the mesh — on this machine or others, in any clone — do not edit them meanwhile: exclusive (the default) or shared. All the " +
			"patterns are granted, or none: if another agent's reservation is in the way you are told whose, which pattern and until when; " +
			"wait (wait_seconds), or work on something else. You keep them while this session lives, until release_files. A commit " +
			"touching files another agent reserved is refused where the guard is installed.",
		InputSchema: schemaOf[reserveIn](func(p map[string]*jsonschema.Schema) {
			patterns(p, true)
			p["wait_seconds"].Minimum, p["wait_seconds"].Maximum = jsonschema.Ptr(0.0), jsonschema.Ptr(messages.MaxReservationWait.Seconds())
			p["ttl_seconds"].Minimum, p["ttl_seconds"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(messages.MaxReservationTTL.Seconds())
		})}, m.reserveFiles)
	addTool(m.tools, &mcp.Tool{Name: "release_files", Title: "Release reserved files",
		Description: "Release reservations you made with reserve_files (the patterns given, else all of yours in this repository), as soon " +
			"as you are done with the files, so that others may take them.",
		InputSchema: schemaOf[releaseIn](func(p map[string]*jsonschema.Schema) { patterns(p, false) })}, m.releaseFiles)
	addTool(m.tools, &mcp.Tool{Name: "list_reservations", Title: "List reservations",
		Description: "List the reservations in this repository: which patterns, exclusive or shared, by whom, until when.",
		InputSchema: schemaOf[reservationsIn](nil)}, m.listReservations)
	addTool(m.tools, &mcp.Tool{Name: "start_session", Title: "Start a session",
		Description: "Call this first: it joins you to the mesh (your name and mesh), reserves the files you are about to edit " +
			"(patterns, as reserve_files takes them) and returns your unread messages — one call instead of three.",
		InputSchema: schemaOf[startSessionIn](func(p map[string]*jsonschema.Schema) {
			patterns(p, false)
			p["ttl_seconds"].Minimum, p["ttl_seconds"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(messages.MaxReservationTTL.Seconds())
			p["summary"].MaxLength = jsonschema.Ptr(512)
		})}, m.startSession)
}

// errNoRepo is the answer outside a git repository.
var errNoRepo = errors.New("this session does not run in a git repository with a commit, so it has no files to reserve: " +
	"start the agent in the repository's directory")

// repoSession checks a request in the server's repository (req nil: none
// to check) and returns the session to make it as.
func (m *mcpServer) repoSession(ctx context.Context, req interface{ Validate() error }) (*Session, error) {
	if repoOnce() == "" {
		return nil, errNoRepo
	}
	if req != nil {
		if err := req.Validate(); err != nil {
			return nil, m.lockError(nil, err)
		}
	}
	s, err := m.link.get(ctx)
	if err != nil {
		return nil, m.toolError(nil, err)
	}
	return s, nil
}

func (m *mcpServer) reserveFiles(ctx context.Context, _ *mcp.CallToolRequest, in reserveIn) (*mcp.CallToolResult, *reserveOut, error) {
	req := &messages.ReserveRequest{Repo: repoOnce(), Patterns: in.Patterns, Shared: in.Shared, TTLMs: int64(in.TTLSeconds) * 1000,
		WaitMs: int64(in.WaitSeconds) * 1000, Force: in.Force}
	s, err := m.repoSession(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	out, text, err := m.reserve(ctx, s, req, "")
	if err != nil {
		return nil, nil, m.lockError(s, err)
	}
	return textResult(text), out, nil
}

// reserve asks for req as s: the tool's result and its text. via names
// the tool that takes wait_seconds and force, when the caller is another
// tool (start_session takes neither); "" is reserve_files itself.
func (m *mcpServer) reserve(ctx context.Context, s *Session, req *messages.ReserveRequest, via string) (*reserveOut, string, error) {
	res, err := ipc.WhenLinked(ctx, func() (*messages.Reserved, error) { return s.as().Reserve(ctx, req) })
	if err != nil {
		return nil, "", err
	}
	out := &reserveOut{Granted: res.Granted, FenceToken: res.FenceToken, Patterns: req.Patterns, Conflicts: []reservationOut{}}
	for _, r := range res.Forced {
		out.Forced = append(out.Forced, reservationOf(r))
	}
	for _, r := range res.Reservations {
		out.Reservations = append(out.Reservations, reservationOf(r))
	}
	for _, c := range res.Conflicts {
		r := reservationOf(c.ReservationInfo)
		r.Yours, r.Path, r.Gone = c.Yours, c.Path, c.Stale
		out.Conflicts = append(out.Conflicts, r)
	}
	if !res.Granted {
		again, force := "call again with wait_seconds", "force"
		if via != "" {
			again, force = "call "+via+" with wait_seconds", via+" with force"
		}
		var b strings.Builder
		b.WriteString("Not granted; in the way:")
		for _, c := range out.Conflicts {
			fmt.Fprintf(&b, "\n- %s holds %s (%s) until %s: it covers %s, as your %s does", c.Holder, c.Pattern, kindOf(c.Exclusive),
				c.ExpiresAt, c.Path, c.Yours)
			switch {
			case c.Gone:
				b.WriteString(" (its holder is gone: " + force + " would release it)")
			case req.Force:
				b.WriteString(" (" + messages.NotStale + ")")
			}
		}
		b.WriteString("\nWait for them (" + again + "), message the holder, or work on other files.")
		return out, b.String(), nil
	}
	m.changed(ctx, kindReservations, "")
	return out, fmt.Sprintf("You hold %s (%s, fence token %d) while this session lives; call release_files when done.",
		strings.Join(req.Patterns, " "), kindOf(!req.Shared), res.FenceToken), nil
}

func kindOf(exclusive bool) string {
	if exclusive {
		return "exclusive"
	}
	return "shared"
}

func reservationOf(r messages.ReservationInfo) reservationOut {
	return reservationOut{Pattern: r.Pattern, Exclusive: r.Exclusive, Holder: r.HolderName, ExpiresAt: r.ExpiresAt}
}

func (m *mcpServer) releaseFiles(ctx context.Context, _ *mcp.CallToolRequest, in releaseIn) (*mcp.CallToolResult, *releaseOut, error) {
	req := &messages.ReleaseReservationsRequest{Repo: repoOnce(), Patterns: in.Patterns}
	s, err := m.repoSession(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.ReservationsReleased, error) { return s.as().ReleaseReservations(ctx, req) })
	if err != nil {
		return nil, nil, m.lockError(s, err)
	}
	out := &releaseOut{Released: res.Released}
	if len(res.Released) > 0 {
		m.changed(ctx, kindReservations, "")
	}
	if len(res.Released) == 0 {
		return textResult("You held none of those: nothing released."), out, nil
	}
	return textResult("Released " + strings.Join(res.Released, " ") + "."), out, nil
}

func (m *mcpServer) listReservations(ctx context.Context, _ *mcp.CallToolRequest, _ reservationsIn) (*mcp.CallToolResult, *reservationsOut, error) {
	s, err := m.repoSession(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	res, err := ipc.WhenLinked(ctx, func() (*messages.ReservationList, error) { return s.as().Reservations(ctx, "", repoOnce()) })
	if err != nil {
		return nil, nil, m.lockError(s, err)
	}
	out := &reservationsOut{Reservations: make([]reservationOut, len(res.Reservations))}
	if len(res.Reservations) == 0 {
		return textResult("No files are reserved in this repository."), out, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", count(len(res.Reservations), "reservation", "reservations"))
	for i, r := range res.Reservations {
		out.Reservations[i] = reservationOf(r)
		fmt.Fprintf(&b, "\n%s (%s) held by %s until %s", r.Pattern, kindOf(r.Exclusive), r.HolderName, r.ExpiresAt)
	}
	return textResult(b.String()), out, nil
}

func (m *mcpServer) startSession(ctx context.Context, _ *mcp.CallToolRequest, in startSessionIn) (*mcp.CallToolResult, *startSessionOut, error) {
	var req *messages.ReserveRequest
	var s *Session
	var err error
	if len(in.Patterns) > 0 {
		req = &messages.ReserveRequest{Repo: repoOnce(), Patterns: in.Patterns, Shared: in.Shared, TTLMs: int64(in.TTLSeconds) * 1000}
		s, err = m.repoSession(ctx, req)
	} else if s, err = m.link.get(ctx); err != nil {
		err = m.toolError(nil, err)
	}
	if err != nil {
		return nil, nil, err
	}
	reg, _ := s.Info()
	out := &startSessionOut{Mesh: reg.Mesh, You: reg.DisplayName, Repo: repoOnce()}
	text := []string{fmt.Sprintf("You are %s on mesh %s.", reg.DisplayName, reg.Mesh)}
	if in.Summary != "" {
		if _, err := s.as().SetProfile(ctx, &messages.SetProfile{Summary: &in.Summary}); err != nil {
			return nil, nil, m.toolError(s, err)
		}
	}
	if req != nil {
		res, said, err := m.reserve(ctx, s, req, "reserve_files")
		if err != nil {
			return nil, nil, m.lockError(s, err)
		}
		out.Reservation, text = res, append(text, said)
	}
	inbox, said, err := m.readUnread(ctx, s, checkMessagesDefault)
	if err != nil {
		return nil, nil, m.toolError(s, err)
	}
	out.Inbox, text = inbox, append(text, said)
	return textResult(strings.Join(text, "\n\n")), out, nil
}
