package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// skillCmd is `claudemesh skill`: the mesh's skills (named instructions any
// agent of the mesh fetches) through the daemon, which relays each request
// to the broker.
type skillCmd struct {
	List    skillListCmd    `cmd:"" help:"List the mesh's skills, those whose name or description contains QUERY when one is given."`
	Get     skillGetCmd     `cmd:"" help:"Print a skill's instructions, terminal controls shown as escapes (with --json, the skill exactly, with its version and publisher)."`
	Publish skillPublishCmd `cmd:"" help:"Publish a skill from a file (or - for stdin); publishing a name the mesh has replaces it and bumps its version."`
	Remove  skillRemoveCmd  `cmd:"" help:"Remove a skill from the mesh (removing one it does not have is no error)."`
}

type skillListCmd struct {
	Query string `arg:"" optional:"" help:"Text the name or description must contain (any case)."`
	topicFlags
}

func (c *skillListCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.SkillList, error) {
		return client.Skills(ctx, c.Mesh, c.Query)
	}, func(res *messages.SkillList) error {
		empty := "no skills (publish one with `claudemesh skill publish NAME --file FILE`)"
		if c.Query != "" {
			empty = "no skill matches " + strconv.Quote(c.Query)
		}
		return printList(res.Skills, false, empty, "NAME\tVERSION\tTAGS\tPUBLISHED BY\tPUBLISHED AT\tDESCRIPTION",
			func(s messages.MeshSkill) string {
				return row(s.Name, strconv.Itoa(s.Version), strings.Join(s.Tags, ","), s.PublishedBy, stamp(s.PublishedAt), s.Description)
			})
	})
}

type skillGetCmd struct {
	Name string `arg:"" help:"The skill's name."`
	topicFlags
}

func (c *skillGetCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.SkillAnswer, error) {
		return client.Skill(ctx, c.Mesh, c.Name)
	}, func(res *messages.SkillAnswer) error {
		content := printableText(res.Skill.Content) // any member may publish one: its escapes do not reach the terminal
		if !strings.HasSuffix(content, "\n") {
			content += "\n"
		}
		_, err := io.WriteString(os.Stdout, content)
		return err
	})
}

type skillPublishCmd struct {
	Name        string   `arg:"" help:"The skill's name: 1-64 of a-z 0-9 . _ - starting with a letter or digit."`
	File        string   `required:"" short:"f" placeholder:"FILE" help:"The file holding the skill's instructions (UTF-8 text, at most 64 KiB), or - to read them from stdin."`
	Description string   `help:"One line saying what the skill is for (shown by skill list and matched by its query)."`
	Tag         []string `placeholder:"TAG" help:"A tag (repeat for several)."`
	topicFlags
}

func (c *skillPublishCmd) Run() error {
	content, err := readSkillFile(c.File)
	if err != nil {
		return err
	}
	req := &messages.SkillPublishRequest{Name: c.Name, Description: c.Description, Content: content, Tags: c.Tag, Mesh: c.Mesh}
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.SkillAnswer, error) {
		return client.PublishSkill(ctx, req)
	}, func(res *messages.SkillAnswer) error {
		fmt.Printf("published skill %s version %d (mesh %s)\n", printable(res.Skill.Name), res.Skill.Version, res.Skill.Mesh)
		return nil
	})
}

// maxSkillFile bounds what publish reads: the daemon takes request bodies
// of at most 1 MiB, and the broker skills of at most 64 KiB (it says so).
const maxSkillFile = 1 << 20

// readSkillFile reads the instructions from path, or stdin for "-".
func readSkillFile(path string) (string, error) {
	in := io.Reader(os.Stdin)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("read the skill's instructions: %w", err)
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(io.LimitReader(in, maxSkillFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read the skill's instructions from %s: %w", path, err)
	case len(data) > maxSkillFile:
		return "", fmt.Errorf("%s is over 1 MiB; a skill's instructions are at most 64 KiB: shorten them or split them into several skills", path)
	}
	return string(data), nil
}

type skillRemoveCmd struct {
	Name string `arg:"" help:"The skill's name."`
	topicFlags
}

func (c *skillRemoveCmd) Run() error {
	return topicRun(c.topicFlags, func(ctx context.Context, client *ipc.Client) (*messages.SkillRemoved, error) {
		return client.RemoveSkill(ctx, c.Mesh, c.Name)
	}, func(res *messages.SkillRemoved) error {
		if !res.Removed {
			fmt.Printf("mesh %s has no skill %s; nothing to remove\n", res.Mesh, printable(res.Name))
			return nil
		}
		fmt.Printf("removed skill %s (mesh %s)\n", printable(res.Name), res.Mesh)
		return nil
	})
}
