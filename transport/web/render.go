package web

import (
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/claudemesh/claudemesh-go/messages"
)

// page is what every template gets: the page's own data and the frame's.
type page struct {
	Name  string // the page's template, its nav entry
	CSRF  string
	Done  string // what the last action did
	Error string // or why it failed
	Now   time.Time
	Data  any
}

// messageView is one inbox message as its template draws it, with the
// page it is on.
type messageView struct {
	Page *page
	Item messages.InboxItem
}

// pageNames are the pages and their templates; "refused" stands alone.
var pageNames = []string{"mesh", "inbox", "outbox", "confirm", "files", "compose"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{"show": show, "ago": ago, "short": short, "plural": plural, "count": count, "when": when,
		"outboxFilters": func() []string { return outboxStatuses },
		"msg":           func(p *page, it messages.InboxItem) messageView { return messageView{Page: p, Item: it} }}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html",
			"templates/"+name+".html"))
	}
	out["refused"] = template.Must(template.New("refused").Funcs(funcs).ParseFS(templateFiles, "templates/refused.html"))
	return out
}

// render draws page name with data: the whole page, or with ?fragment=1
// its main part alone (what the page's script swaps in when an event says
// the page changed).
func (v *View) render(w http.ResponseWriter, r *http.Request, s *session, name string, data any) {
	q := r.URL.Query()
	p := &page{Name: name, CSRF: s.csrf, Done: q.Get("done"), Error: q.Get("failed"), Now: v.opts.Now(), Data: data}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	tmpl := "layout"
	if q.Get("fragment") == "1" {
		tmpl = "main"
	}
	if err := v.pages[name].ExecuteTemplate(w, tmpl, p); err != nil {
		v.opts.Log.Warn("web_render", "page", name, "err", err)
	}
}

// show is s as text that cannot pass for anything else: C0 and C1 control
// characters (a terminal's escape sequences among them) drawn as their
// Unicode control pictures or code points, and the bidirectional controls
// that reorder text as their code points; html/template escapes the rest.
func show(s string) string {
	clean := true
	for _, r := range s {
		if hidden(r) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteRune(0x2400 + r) // ␛ for ESC
		case r == 0x7f:
			b.WriteRune('\u2421')
		case hidden(r):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hidden reports the characters show makes visible.
func hidden(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r < 0xa0 ||
		r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// ago is how long before now an RFC 3339 time (or Unix ms) was, in words.
func ago(now time.Time, t any) string {
	at, ok := timeOf(t)
	if !ok {
		return "—"
	}
	d := now.Sub(at)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = strconv.Itoa(int(d.Seconds())) + " s"
	case d < time.Hour:
		s = strconv.Itoa(int(d.Minutes())) + " min"
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d.Hours())) + " h"
	default:
		s = strconv.Itoa(int(d.Hours()/24)) + " d"
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// when is a time as the page prints it: UTC, to the second.
func when(t any) string {
	at, ok := timeOf(t)
	if !ok {
		return ""
	}
	return at.UTC().Format("2006-01-02 15:04:05Z")
}

func timeOf(t any) (time.Time, bool) {
	switch x := t.(type) {
	case string:
		at, err := time.Parse(time.RFC3339Nano, x)
		return at, err == nil
	case *string:
		if x == nil {
			return time.Time{}, false
		}
		return timeOf(*x)
	case int64:
		return time.UnixMilli(x), x > 0
	case time.Time:
		return x, !x.IsZero()
	}
	return time.Time{}, false
}

// short is a key's first 12 characters.
func short(key string) string {
	if len(key) > 12 {
		return key[:12] + "…"
	}
	return key
}

// plural is "1 row", "2 rows", "10,003 rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return count(n) + " " + noun + "s"
}

// count is n ≥ 0 with its thousands apart: "10,003".
func count(n int) string {
	s := strconv.Itoa(n)
	first := (len(s)-1)%3 + 1
	var b strings.Builder
	b.WriteString(s[:first])
	for i := first; i < len(s); i += 3 {
		b.WriteString("," + s[i:i+3])
	}
	return b.String()
}
