package hookcmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/config"
	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/hookevent"
)

// TestStartContextText: nothing to tell is no context; otherwise a line
// for each kind of fact, in plural forms, a list cut at maxListed, and
// other repositories named.
func TestStartContextText(t *testing.T) {
	const here = "git:here"
	res := func(pattern, repo, holder string, exclusive bool) messages.ReservationInfo {
		return messages.ReservationInfo{Pattern: pattern, Repo: repo, HolderName: holder, Holder: "ab12cd34ef", Exclusive: exclusive,
			ExpiresAt: "T"}
	}
	var many []messages.ReservationInfo
	for i := range maxListed + 2 {
		many = append(many, res(fmt.Sprintf("p%d/**", i), here, "", true))
	}
	you := &messages.SessionInfo{DisplayName: "ada", Mesh: "local"}
	cases := []struct {
		name string
		c    startContext
		want string
	}{
		{"nothing", startContext{you: you, repo: here}, ""},
		{"one unread", startContext{you: you, unread: 1}, "claudemesh: you are ada on mesh local.\n- 1 unread message: call check_messages to read them."},
		{"a full page", startContext{you: you, unread: 100, moreUnread: true},
			"claudemesh: you are ada on mesh local.\n- more than 100 unread messages: call check_messages to read them."},
		{"held here and elsewhere, and locks", startContext{you: you, repo: here,
			held:  []messages.ReservationInfo{res("src/**", here, "ada", false), res("go.mod", "git:other", "ada", true)},
			locks: []messages.LockInfo{{Key: "deploy", Repo: here, ExpiresAt: "T"}, {Key: "release", ExpiresAt: "T"}}},
			"claudemesh: you are ada on mesh local.\n" +
				"- You hold 2 file reservations: src/** (shared, until T); go.mod (exclusive, until T) in git:other. Release them with release_files when you are done.\n" +
				"- You hold 2 locks: deploy (until T); release (mesh-wide, until T)."},
		{"others, no session yet", startContext{repo: here, others: []messages.ReservationInfo{res("docs/**", here, "bob", true)}},
			"claudemesh.\n- Others' reservations in this repository: bob holds docs/** (exclusive, until T). " +
				"Check list_reservations before you edit those paths: reserve_files refuses an overlap."},
	}
	for _, c := range cases {
		if got := c.c.text(); got != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, got, c.want)
		}
	}
	long := (&startContext{repo: here, others: many}).text()
	if !strings.Contains(long, "ab12cd34 holds p7/**") || strings.Contains(long, "p8/**") || !strings.Contains(long, "; and 2 more.") {
		t.Errorf("a long list: %s", long)
	}
}

// TestStartingSession: the session of the id (on the payload's mesh when
// it has several), of an alias, or at a /clear the one the process goes
// on as; none for an unknown id.
func TestStartingSession(t *testing.T) {
	paths := config.Paths{DaemonDir: t.TempDir()}
	recs := []config.SessionRecord{
		{Token: strings.Repeat("a", 64), SessionID: "s1", Mesh: "local", PID: 1 << 30, RegisteredAt: 1},
		{Token: strings.Repeat("b", 64), SessionID: "s1", Mesh: "work", PID: 1 << 30, RegisteredAt: 2},
		{Token: strings.Repeat("c", 64), SessionID: "s2", Mesh: "local", PID: 4242, RegisteredAt: 3, Aliases: []string{"s2-cleared"}},
	}
	if err := paths.SaveSessions(recs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   string
		p    hookevent.Payload
		want string // the token's first letter; "" for none
	}{
		{"s1", hookevent.Payload{Mesh: "work"}, "b"},
		{"s1", hookevent.Payload{Mesh: "local"}, "a"},
		{"s2-cleared", hookevent.Payload{}, "c"},
		{"s3", hookevent.Payload{Kind: "clear", PID: 4242}, "c"},
		{"s3", hookevent.Payload{Kind: "startup", PID: 4242}, ""},
		{"s3", hookevent.Payload{Kind: "clear", PID: 1}, ""},
	} {
		rec, ok := startingSession(paths, c.id, &c.p)
		if got := map[bool]string{true: rec.Token[:min(1, len(rec.Token))], false: ""}[ok]; got != c.want {
			t.Errorf("startingSession(%s, %+v) = %+v %v, want the token of %q", c.id, c.p, rec, ok, c.want)
		}
	}
}
