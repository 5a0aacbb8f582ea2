package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

type profileCmd struct {
	Mesh    string  `placeholder:"SLUG" help:"Only this mesh (default: every mesh the daemon serves, other agents' identities (daemon add-agent) aside; inside an agent session, the session's)."`
	Status  *string `placeholder:"STATUS" help:"Set the status peers see: idle, working or dnd."`
	Summary *string `placeholder:"TEXT" help:"Set the summary peers see (at most 4096 bytes; \"\" clears it)."`
	JSON    bool    `name:"json" help:"Print the daemon's answer as one JSON object."`
}

// Run shows the profile the mesh's broker lists for this daemon's member —
// inside an agent session, for the session — (GET /v1/profile), or with
// --status or --summary sets those fields (POST /v1/profile).
func (c *profileCmd) Run() error {
	client, err := daemonClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.Status == nil && c.Summary == nil {
		return c.show(ctx, client)
	}
	req := &messages.SetProfile{Mesh: c.Mesh, Status: c.Status, Summary: c.Summary}
	if _, err := req.Validate(); err != nil { // the daemon checks too; this saves the round trip
		return &exitError{code: 2, err: err}
	}
	res, err := client.SetProfile(ctx, req)
	if err != nil {
		return profileError(err)
	}
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("set %s on %s\n", strings.Join(res.Applied, ", "), printable(strings.Join(res.Meshes, ", ")))
	return nil
}

func (c *profileCmd) show(ctx context.Context, client *ipc.Client) error {
	res, err := client.Profiles(ctx, c.Mesh)
	if err != nil {
		return profileError(err)
	}
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for i, p := range res.Profiles {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "mesh %s (%s)\n", printable(p.Mesh), printable(short(p.MemberPubkey, 16)))
		visible := "yes"
		if !p.Visible {
			visible = "no (hidden from peer lists)"
		}
		for _, f := range [][2]string{{"name", p.DisplayName}, {"status", p.Status}, {"summary", p.Summary},
			{"visible", visible}, {"title", p.Title}, {"bio", p.Bio}, {"avatar", p.Avatar},
			{"capabilities", strings.Join(p.Capabilities, ", ")}} {
			if f[1] != "" || f[0] == "summary" {
				fmt.Fprintf(tw, "  %s:\t%s\n", f[0], printable(f[1]))
			}
		}
	}
	tw.Flush()
	meshes := make([]string, 0, len(res.Failed))
	for m := range res.Failed {
		meshes = append(meshes, m)
	}
	slices.Sort(meshes)
	for _, m := range meshes {
		fmt.Printf("mesh %s: the broker could not say (%s)\n", printable(m), printable(res.Failed[m]))
	}
	if len(res.Profiles) == 0 && len(meshes) == 0 {
		fmt.Println("no meshes")
	}
	return nil
}

// profileError makes a refusal of the request (4xx: a bad field, an
// unknown mesh) a usage error; the rest stay failures.
func profileError(err error) error {
	var me *messages.Error
	if errors.As(err, &me) && me.Status >= 400 && me.Status < 500 {
		return &exitError{code: 2, err: err}
	}
	return err
}
