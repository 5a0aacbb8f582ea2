package join

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// Link is a parsed invite link: a token, or a short code to resolve first.
type Link struct {
	Token string
	// CodeURL is set for a short link instead of Token: the GET that
	// answers its token, https://host/api/public/invite-code/<code>.
	CodeURL string
}

// The link forms (the upstream CLI's patterns, and its short link).
var (
	httpLink  = regexp.MustCompile(`^https?://[^/?#@]+(?:/[a-z]{2})?/join/([A-Za-z0-9_-]+)/?$`)
	shortLink = regexp.MustCompile(`^https://([^/?#@]+)(?:/[a-z]{2})?/i/([A-Za-z0-9_-]{1,64})/?$`)
	bareToken = regexp.MustCompile(`^[A-Za-z0-9_-]{21,}$`)
	token     = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// CodePath is where a short link's code is looked up.
const CodePath = "/api/public/invite-code/"

// ParseLink recognizes the link forms. It checks the form only: the token
// may still not decode (Check). Errors wrap ErrBadInviteLink.
func ParseLink(raw string) (*Link, error) {
	s := strings.TrimSpace(raw)
	if t, ok := strings.CutPrefix(s, "ic://join/"); ok {
		if t = strings.TrimSuffix(t, "/"); !token.MatchString(t) {
			return nil, fmt.Errorf("%w: the token after ic://join/ must be base64url", ErrBadInviteLink)
		}
		return &Link{Token: t}, nil
	}
	if m := httpLink.FindStringSubmatch(s); m != nil {
		return &Link{Token: m[1]}, nil
	}
	if m := shortLink.FindStringSubmatch(s); m != nil {
		return &Link{CodeURL: "https://" + m[1] + CodePath + m[2]}, nil
	}
	if bareToken.MatchString(s) {
		return &Link{Token: s}, nil
	}
	shown := s
	if len(shown) > 40 {
		shown = shown[:40] + "…"
	}
	return nil, fmt.Errorf("%w: %q; expected http(s)://host/join/<token>, https://host/i/<code>, ic://join/<token> or the bare token",
		ErrBadInviteLink, shown)
}

// Invite is an invite checked offline, ready to join with.
type Invite struct {
	Token   string
	Payload *messages.InvitePayload
	JoinURL string // where its broker serves POST /join
}

// Check decodes token and checks its shape, expiry at now and signature,
// as the upstream CLI does, then that its broker URL is one to join at.
// Errors wrap messages.ErrInviteMalformed, ErrInviteExpired or
// ErrInviteSignature.
func Check(token string, now time.Time) (*Invite, error) {
	p, err := messages.DecodeInviteToken(token)
	if err != nil {
		return nil, err
	}
	if err := p.Verify(now); err != nil {
		return nil, err
	}
	joinURL, err := JoinURL(p.BrokerURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", messages.ErrInviteMalformed, err)
	}
	return &Invite{Token: token, Payload: p, JoinURL: joinURL}, nil
}

// JoinURL is where the broker at brokerURL (ws(s)://host[/path]/ws)
// serves joins: http(s)://host[/path]/join.
func JoinURL(brokerURL string) (string, error) {
	u, err := url.Parse(brokerURL)
	if err != nil {
		return "", fmt.Errorf("broker_url: %w", err)
	}
	scheme, ok := map[string]string{"ws": "http", "wss": "https"}[u.Scheme]
	if !ok || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("broker_url %q: want ws(s)://host[:port]/ws", brokerURL)
	}
	u.Scheme = scheme
	u.Path, u.RawPath = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/ws")+Path, ""
	return u.String(), nil
}

// BrokerURLs derives, from the base URL joiners reach a broker's HTTP
// listener at (http(s)://host[:port][/path]; its ws(s)://…/ws URL is
// accepted too), the broker_url an invite carries and the origin its
// links start with.
func BrokerURLs(base string) (brokerURL, linkOrigin string, err error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return "", "", fmt.Errorf("broker URL: %w", err)
	}
	switch u.Scheme {
	case "http", "https":
	case "ws", "wss":
		u.Scheme = map[string]string{"ws": "http", "wss": "https"}[u.Scheme]
		u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/ws")
	default:
		return "", "", fmt.Errorf("broker URL %q: the scheme must be http or https", base)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", "", fmt.Errorf("broker URL %q: want http(s)://host[:port][/path]", base)
	}
	linkOrigin = u.Scheme + "://" + u.Host
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path, u.RawPath = strings.TrimSuffix(u.Path, "/")+"/ws", ""
	return u.String(), linkOrigin, nil
}

// LinkURL is the link printed for token: origin/join/<token>, the form
// every CLI reads (a base path would not be: it lives in broker_url).
func LinkURL(origin, token string) string { return origin + Path + "/" + token }
