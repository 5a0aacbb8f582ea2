package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// The Agent Mail set's file reservations, mapped onto reserve_files and
// release_files. Where they differ: a reservation in the way refuses the
// request, all its paths or none (Agent Mail grants and reports the
// conflicts); every grant has a fence token, which stands for Agent
// Mail's file_reservation_ids; the daemon renews a session's reservations
// while it lives, so a TTL is how long they outlive it.
type (
	amReserveIn struct {
		amProject
		amAgent
		Paths      []string `json:"paths" jsonschema:"What to reserve: gitignore-style patterns from the repository's root, e.g. src/** or docs/*.md."`
		TTLSeconds int      `json:"ttl_seconds,omitempty" jsonschema:"How long they outlive this session if it dies without releasing them, 1-3600 seconds (default 3600); the daemon renews them while the session lives."`
		Exclusive  *bool    `json:"exclusive,omitempty" jsonschema:"Exclusive (the default: no other agent may reserve what they cover) or shared (false)."`
		Reason     string   `json:"reason,omitempty" jsonschema:"Agent Mail's reason: not kept."`
		amFormat
	}
	amReleaseIn struct {
		amProject
		amAgent
		Paths              []string `json:"paths,omitempty" jsonschema:"The patterns to release, as reserved."`
		FileReservationIDs []int64  `json:"file_reservation_ids,omitempty" jsonschema:"The fence tokens of the grants to release (claudemesh's reservations have a fence token per grant in place of ids). Neither paths nor ids: all of yours in this repository."`
		amFormat
	}
	amRenewIn struct {
		amProject
		amAgent
		ExtendSeconds      int      `json:"extend_seconds,omitempty" jsonschema:"How long they outlive this session from now, 1-3600 seconds (default 1800). The daemon renews them while the session lives in any case."`
		Paths              []string `json:"paths,omitempty" jsonschema:"The patterns to renew, as reserved."`
		FileReservationIDs []int64  `json:"file_reservation_ids,omitempty" jsonschema:"The fence tokens of the grants to renew. Neither paths nor ids: all of yours in this repository."`
		amFormat
	}
)

func (m *mcpServer) addAgentMailFileTools() {
	ids := func(p map[string]*jsonschema.Schema) {
		reservationPaths(p["paths"], false)
		p["file_reservation_ids"].MaxItems = jsonschema.Ptr(messages.MaxReservePatterns)
		p["file_reservation_ids"].Items = &jsonschema.Schema{Type: "integer", Minimum: jsonschema.Ptr(1.0)}
	}
	addTool(m.tools, &mcp.Tool{Name: "file_reservation_paths", Title: "Reserve files",
		Description: "Reserve files of this git repository before editing them, as Agent Mail's file_reservation_paths, for every " +
			"agent of the mesh on any machine. Unlike Agent Mail, another agent's reservation in the way refuses the request, all " +
			"its paths or none, naming the holder; a grant carries a fence token. The commit guard refuses commits touching others' " +
			"exclusive reservations.",
		Annotations: writes(false, false, false),
		InputSchema: schemaOf[amReserveIn](func(p map[string]*jsonschema.Schema) {
			reservationPaths(p["paths"], true)
			p["ttl_seconds"].Minimum, p["ttl_seconds"].Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(messages.MaxReservationTTL.Seconds())
		}),
	}, m.amReserve)
	addTool(m.tools, &mcp.Tool{Name: "release_file_reservations", Title: "Release reserved files",
		Description: "Release your file reservations, as Agent Mail's release_file_reservations: by paths, by fence token " +
			"(file_reservation_ids), or all of yours in this repository.",
		Annotations: writes(false, true, false),
		InputSchema: schemaOf[amReleaseIn](ids),
	}, m.amRelease)
	addTool(m.tools, &mcp.Tool{Name: "renew_file_reservations", Title: "Renew file reservations",
		Description: "Extend your file reservations, as Agent Mail's renew_file_reservations: each is granted again for " +
			"extend_seconds from now (a new fence token). The daemon renews them by itself while your session lives; this sets how " +
			"long they outlast it.",
		Annotations: writes(false, false, false),
		InputSchema: schemaOf[amRenewIn](func(p map[string]*jsonschema.Schema) {
			ids(p)
			p["extend_seconds"].Minimum = jsonschema.Ptr(1.0)
			p["extend_seconds"].Maximum = jsonschema.Ptr(messages.MaxReservationTTL.Seconds())
		}),
	}, m.amRenew)
}

func (m *mcpServer) amReserve(ctx context.Context, req *mcp.CallToolRequest, in amReserveIn) (*mcp.CallToolResult, *reserveOut, error) {
	return m.reserveFiles(ctx, req, reserveIn{Patterns: in.Paths, Shared: in.Exclusive != nil && !*in.Exclusive,
		TTLSeconds: cmp.Or(in.TTLSeconds, amReservationTTL)})
}

func (m *mcpServer) amRelease(ctx context.Context, req *mcp.CallToolRequest, in amReleaseIn) (*mcp.CallToolResult, *releaseOut, error) {
	if len(in.FileReservationIDs) == 0 {
		return m.releaseFiles(ctx, req, releaseIn{Patterns: in.Paths})
	}
	mine, err := m.ownReservations(ctx, in.Paths, in.FileReservationIDs)
	if err != nil {
		return nil, nil, err
	}
	if len(mine) == 0 {
		return textResult("You hold none of those: nothing released."), &releaseOut{Released: []string{}}, nil
	}
	var patterns []string
	for _, r := range mine {
		patterns = append(patterns, r.Pattern)
	}
	return m.releaseFiles(ctx, req, releaseIn{Patterns: patterns})
}

func (m *mcpServer) amRenew(ctx context.Context, _ *mcp.CallToolRequest, in amRenewIn) (*mcp.CallToolResult, *reserveOut, error) {
	mine, err := m.ownReservations(ctx, in.Paths, in.FileReservationIDs)
	if err != nil {
		return nil, nil, err
	}
	if len(mine) == 0 {
		return nil, nil, fmt.Errorf("you hold no reservation in this repository%s; nothing was renewed: list_peers' agents may hold them, "+
			"file_reservation_paths takes new ones", map[bool]string{true: " of those", false: ""}[len(in.Paths)+len(in.FileReservationIDs) > 0])
	}
	s, err := m.repoSession(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	ttl := int64(cmp.Or(in.ExtendSeconds, 1800)) * 1000
	var out *reserveOut
	var said []string
	for _, exclusive := range []bool{true, false} { // one grant for each kind
		var patterns []string
		for _, r := range mine {
			if r.Exclusive == exclusive {
				patterns = append(patterns, r.Pattern)
			}
		}
		if len(patterns) == 0 {
			continue
		}
		res, text, err := m.reserve(ctx, s, &messages.ReserveRequest{Repo: repoOnce(), Patterns: patterns, Shared: !exclusive, TTLMs: ttl},
			"file_reservation_paths")
		if err != nil {
			return nil, nil, m.lockError(s, err)
		}
		said = append(said, text)
		if out == nil {
			out = res
		} else {
			out.Granted = out.Granted && res.Granted
			out.Patterns = append(out.Patterns, res.Patterns...)
			out.Conflicts = append(out.Conflicts, res.Conflicts...)
			out.Reservations = append(out.Reservations, res.Reservations...)
		}
	}
	return textResult(strings.Join(said, "\n")), out, nil
}

// ownReservations are the session's reservations in the server's
// repository, those of paths or fence tokens ids when either is given.
func (m *mcpServer) ownReservations(ctx context.Context, paths []string, ids []int64) ([]messages.ReservationInfo, error) {
	s, err := m.repoSession(ctx, nil)
	if err != nil {
		return nil, err
	}
	_, me := s.Info()
	list, err := ipc.WhenLinked(ctx, func() (*messages.ReservationList, error) { return s.as().Reservations(ctx, "", repoOnce()) })
	if err != nil {
		return nil, m.lockError(s, err)
	}
	var mine []messages.ReservationInfo
	for _, r := range list.Reservations {
		picked := len(paths) == 0 && len(ids) == 0 || slices.Contains(paths, r.Pattern) || slices.Contains(ids, r.FenceToken)
		if strings.EqualFold(r.Holder, me) && picked {
			mine = append(mine, r)
		}
	}
	return mine, nil
}
