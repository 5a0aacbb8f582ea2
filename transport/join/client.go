package join

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/messages/backoff"
	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// DefaultTimeout bounds one Resolve or Join when the context has no
// deadline.
const DefaultTimeout = 30 * time.Second

// Errors callers branch on (errors.Is). A broker's refusal is an *Error;
// its Unwrap names the condition. The offline checks' errors are
// messages.ErrInviteMalformed, ErrInviteExpired and ErrInviteSignature;
// a broker that finds the invite expired or its signature bad matches
// those too.
var (
	ErrInviteCodeUnknown = errors.New("the short invite code is unknown")
	ErrInviteUnknown     = errors.New("the broker does not know this invite")
	ErrInviteRevoked     = errors.New("the invite was revoked")
	ErrInviteUsedUp      = errors.New("the invite has no uses left")
	ErrMemberRevoked     = errors.New("this key was revoked from the mesh")
	ErrNameTaken         = errors.New("the display name is taken in this mesh")
	ErrBadRequest        = errors.New("the broker refused the join request")
	// ErrRejected is any other answer that is not a membership: a 5xx, a
	// redirect, a body that is not ours (a proxy, something that is not a
	// claudemesh broker).
	ErrRejected = errors.New("the broker did not accept the join")
	// ErrUnreachable means no HTTP answer came back: DNS, connection
	// refused, TLS, timeout.
	ErrUnreachable = errors.New("broker unreachable")
)

// Error is an answer from the broker other than a membership.
type Error struct {
	Status int    // HTTP status
	Code   string // the answer's error; "" when the body was not ours
	Detail string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%v (HTTP %d", e.Unwrap(), e.Status)
	if e.Code != "" {
		msg += " " + e.Code
	}
	msg += ")"
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap maps the answer's code to the sentinel callers branch on.
func (e *Error) Unwrap() error {
	if err, ok := map[string]error{CodeNotFound: ErrInviteUnknown, CodeRevoked: ErrInviteRevoked,
		CodeExhausted: ErrInviteUsedUp, CodeExpired: messages.ErrInviteExpired, CodeBadSignature: messages.ErrInviteSignature,
		CodeMemberRevoked: ErrMemberRevoked, CodeNameTaken: ErrNameTaken}[e.Code]; ok {
		return err
	}
	if e.Code != "" && e.Status >= 400 && e.Status < 500 {
		return ErrBadRequest
	}
	return ErrRejected
}

// Joined is the membership a join registered.
type Joined struct {
	MeshID        string
	MemberID      string
	Slug          string
	Name          string // the slug: our broker has no mesh display name
	Role          string
	BrokerURL     string // ws(s)://…/ws, from the invite
	AlreadyMember bool   // the key was a member already; no use was consumed
}

// DefaultAttempts is how often Join sends the same request when no answer
// or a 5xx comes back. Retrying is safe: the broker answers a key that
// already joined with its membership and uses nothing.
const DefaultAttempts = 3

// joinRetry is the wait before each further send of one Join: 500 ms,
// doubling (Attempts bounds the sends, the context the time).
var joinRetry = backoff.Schedule{First: 500 * time.Millisecond}

// Client resolves links and joins. The zero value is ready to use.
type Client struct {
	// HTTP is the client to send with; nil means one on
	// http.DefaultTransport. Its redirect policy is ignored: a join never
	// follows a redirect.
	HTTP *http.Client
	// Attempts bounds the sends of one Join; 0 means DefaultAttempts.
	Attempts int
	// Now is the clock expiry is checked against; nil means time.Now.
	Now func() time.Time
}

// Resolve reads an invite link of any form and checks the invite offline
// (Check). Only a short link makes a request: the lookup of its code.
func (c *Client) Resolve(ctx context.Context, link string) (*Invite, error) {
	l, err := ParseLink(link)
	if err != nil {
		return nil, err
	}
	tok := l.Token
	if l.CodeURL != "" {
		if tok, err = c.lookupCode(ctx, l.CodeURL); err != nil {
			return nil, err
		}
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	return Check(tok, now())
}

// codeAnswer is the short-code lookup's answer.
type codeAnswer struct {
	Found *bool  `json:"found"`
	Token string `json:"token"`
}

func (c *Client) lookupCode(ctx context.Context, codeURL string) (string, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, codeURL, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadInviteLink, err)
	}
	req.Header.Set("Accept", "application/json")
	raw, resp, err := c.do(req)
	if err != nil {
		return "", err
	}
	var a codeAnswer
	switch {
	case resp.StatusCode != http.StatusOK || !isJSON(resp) || json.Unmarshal(raw, &a) != nil || a.Found == nil:
		return "", &Error{Status: resp.StatusCode, Detail: "the short-link lookup at " + req.URL.Host +
			" did not answer {found, token}; use the full invite link"}
	case !*a.Found:
		return "", fmt.Errorf("%w at %s; ask for a new invite", ErrInviteCodeUnknown, req.URL.Host)
	case !token.MatchString(a.Token):
		return "", fmt.Errorf("%w: the short-link lookup answered a token that is not base64url", messages.ErrInviteMalformed)
	}
	return a.Token, nil
}

// Join enrolls id's public key under displayName with the invite's
// broker. Errors wrap ErrUnreachable or are an *Error (see its Unwrap).
func (c *Client) Join(ctx context.Context, inv *Invite, id *meshcrypto.Identity, displayName string) (*Joined, error) {
	payload, err := json.Marshal(inv.Payload)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(Request{InviteToken: inv.Token, InvitePayload: payload,
		PeerPubkey: id.PublicKeyHex(), DisplayName: displayName})
	if err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	attempts := c.Attempts
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	for attempt := 1; ; attempt++ {
		j, err := c.post(ctx, inv, body)
		if err == nil || attempt >= attempts || !retryable(err) {
			return j, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(joinRetry.Delay(attempt, nil)):
		}
	}
}

// retryable: no answer, or a server-side failure (a proxy's 502-504
// included).
func retryable(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return errors.Is(err, ErrUnreachable) || ok && e.Status >= 500
}

// post sends the request once.
func (c *Client) post(ctx context.Context, inv *Invite, body []byte) (*Joined, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, inv.JoinURL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", messages.ErrInviteMalformed, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	raw, resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	var out Response
	ours := isJSON(resp) && json.Unmarshal(raw, &out) == nil
	if resp.StatusCode == http.StatusOK && ours && out.OK && out.MemberID != "" {
		p := inv.Payload
		return &Joined{MeshID: p.MeshID, MemberID: out.MemberID, Slug: p.MeshSlug, Name: p.MeshSlug, Role: p.Role,
			BrokerURL: p.BrokerURL, AlreadyMember: out.AlreadyMember}, nil
	}
	e := &Error{Status: resp.StatusCode}
	switch {
	case ours && !out.OK && out.Error != "":
		e.Code, e.Detail = out.Error, out.Detail
	case resp.StatusCode == http.StatusOK:
		e.Detail = "the answer is not a claudemesh membership; is broker_url a claudemesh broker?"
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		e.Detail = "the broker redirects the join"
		if loc := resp.Header.Get("Location"); loc != "" {
			e.Detail += " to " + loc
		}
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed:
		e.Detail = "no claudemesh join endpoint at " + inv.JoinURL
	default:
		e.Detail = strings.TrimSpace(http.StatusText(resp.StatusCode))
	}
	return nil, e
}

// do sends req without following redirects and reads at most
// MaxResponseBytes of the answer.
func (c *Client) do(req *http.Request) ([]byte, *http.Response, error) {
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		// *url.Error repeats the URL: keep only the cause.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, nil, fmt.Errorf("%w at %s: %w", ErrUnreachable, req.URL.Host, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("%w at %s: reading the answer: %w", ErrUnreachable, req.URL.Host, err)
	}
	return raw, resp, nil
}

func isJSON(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
