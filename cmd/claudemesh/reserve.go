package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/cmd/internal/gitrepo"
	"github.com/claudemesh/claudemesh-go/cmd/internal/mcpserver"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// reserveCmd is `claudemesh reserve`: file reservations by path pattern in
// a git repository (known on every machine by its root commit), acting as
// the calling session (the token of an enclosing `claudemesh launch`).
// A session's reservations are renewed by the daemon while it lives and
// released when it ends; outside one they last their TTL.
type reserveCmd struct {
	Patterns []string      `arg:"" name:"pattern" help:"gitignore-style patterns from the repository's root: src/** (a directory and all below it), docs/*.md, *.go (at any depth), /README.md (the root's only)."`
	Shared   bool          `help:"Reserve shared: others may reserve the same paths shared too (default: exclusive)."`
	TTL      time.Duration `name:"ttl" default:"5m" help:"How long the reservations outlive their holder's last renewal (1s to 1h)."`
	Wait     time.Duration `name:"wait" default:"0s" help:"Wait up to this long while others' reservations are in the way (at most 10m)."`
	Force    bool          `help:"Release first the reservations in the way whose holder has been gone (not renewing) past the broker's threshold; their holder is told."`
	repoFlags
}

// repoFlags name the repository and the mesh.
type repoFlags struct {
	Repo string `placeholder:"DIR" default:"." help:"A directory of the git repository (default: the current one)."`
	topicFlags
}

// repoID is the id of --repo's git repository.
func (f *repoFlags) repoID() (string, error) {
	dir := f.Repo
	if dir == "." {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	id, err := gitrepo.ID(context.Background(), dir)
	if err != nil {
		return "", fmt.Errorf("%w: run it inside the repository, or name a directory of it with --repo DIR", err)
	}
	return id, nil
}

func (c *reserveCmd) Run() error {
	if err := checkTTL(c.TTL, messages.MinReservationTTL); err != nil {
		return err
	}
	repo, err := c.repoID()
	if err != nil {
		return err
	}
	req := &messages.ReserveRequest{Repo: repo, Patterns: c.Patterns, Shared: c.Shared, TTLMs: c.TTL.Milliseconds(),
		WaitMs: c.Wait.Milliseconds(), Force: c.Force, Mesh: c.Mesh}
	if err := req.Validate(); err != nil {
		return usageErr("%v", err)
	}
	res, err := c.ask(req)
	if err != nil {
		return err
	}
	if c.JSON {
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil || res.Granted {
			return err
		}
		return &exitError{code: 3, err: errors.New("refused"), reported: true}
	}
	if !res.Granted {
		return errNotGranted("not granted; in the way:%s\nwait for them (--wait 5m), ask the holder (claudemesh send <name> …) "+
			"or work on other files", conflictLines(res.Conflicts, c.Force))
	}
	kind := "exclusive"
	if c.Shared {
		kind = "shared"
	}
	fmt.Printf("reserved %s (%s) in %s: fence token %d, mesh %s\n", printable(strings.Join(c.Patterns, " ")), kind, printable(repo),
		res.FenceToken, res.Mesh)
	for _, f := range res.Forced {
		fmt.Printf("forced released %s of %s (gone too long); they are told\n", printable(f.Pattern), printable(f.HolderName))
	}
	if tok, _ := mcpserver.SessionToken(); tok == "" {
		fmt.Printf("not in an agent session: nothing renews them; they run out in %s\n", messages.DurationWords(c.TTL))
	}
	return nil
}

// ask asks the daemon for the reservation.
func (c *reserveCmd) ask(req *messages.ReserveRequest) (*messages.Reserved, error) {
	client, err := daemonClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Wait+20*time.Second)
	defer cancel()
	return client.Reserve(ctx, req)
}

// conflictLines says what is in the way, one reservation a line.
func conflictLines(cs []messages.ReservationConflict, force bool) string {
	var b strings.Builder
	for _, c := range cs {
		kind := "shared"
		if c.Exclusive {
			kind = "exclusive"
		}
		fmt.Fprintf(&b, "\n  %s holds %s (%s, fence token %d) until %s: it covers %s, as your %s does", printable(c.HolderName),
			printable(c.Pattern), kind, c.FenceToken, stamp(c.ExpiresAt), printable(c.Path), printable(c.Yours))
		switch {
		case c.Stale:
			b.WriteString(" — its holder is gone: --force releases it")
		case force:
			b.WriteString(" — " + messages.NotStale)
		}
	}
	return b.String()
}

// releaseCmd is `claudemesh release`.
type releaseCmd struct {
	Patterns []string `arg:"" optional:"" name:"pattern" help:"The patterns to release, as reserved (none: all of yours in the repository)."`
	repoFlags
}

func (c *releaseCmd) Run() error {
	repo, err := c.repoID()
	if err != nil {
		return err
	}
	req := &messages.ReleaseReservationsRequest{Repo: repo, Patterns: c.Patterns, Mesh: c.Mesh}
	if err := req.Validate(); err != nil {
		return usageErr("%v", err)
	}
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.ReservationsReleased, error) {
		return client.ReleaseReservations(ctx, req)
	}, func(res *messages.ReservationsReleased) error {
		if len(res.Released) == 0 {
			fmt.Println("nothing of yours to release")
			return nil
		}
		fmt.Printf("released %s\n", printable(strings.Join(res.Released, " ")))
		return nil
	})
}

// reservationsCmd is `claudemesh reservations`.
type reservationsCmd struct {
	All  bool   `help:"Every repository's reservations in the mesh, not only --repo's."`
	Repo string `placeholder:"DIR" default:"." help:"A directory of the git repository (default: the current one)."`
	topicFlags
}

func (c *reservationsCmd) Run() error {
	repo := ""
	if !c.All {
		var err error
		if repo, err = (&repoFlags{Repo: c.Repo}).repoID(); err != nil {
			return err
		}
	}
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.ReservationList, error) {
		return client.Reservations(ctx, c.Mesh, repo)
	}, func(res *messages.ReservationList) error {
		return printList(res.Reservations, false, "no reservations in mesh "+res.Mesh, "PATTERN\tKIND\tHOLDER\tFENCE\tEXPIRES\tREPO",
			func(r messages.ReservationInfo) string {
				kind := "shared"
				if r.Exclusive {
					kind = "exclusive"
				}
				return row(r.Pattern, kind, r.HolderName, fmt.Sprint(r.FenceToken), stamp(r.ExpiresAt), r.Repo)
			})
	})
}
