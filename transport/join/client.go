package join

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/claudemesh/claudemesh-go/transport/meshcrypto"
)

// DefaultTimeout bounds one join request when the context has no deadline.
const DefaultTimeout = 30 * time.Second

// Errors Redeem's callers branch on (errors.Is). A broker's refusal is an
// *Error that matches one of the first five, or ErrRejected.
var (
	ErrInviteUnknown = errors.New("the broker does not know this invite")
	ErrInviteExpired = errors.New("the invite has expired")
	ErrInviteUsedUp  = errors.New("the invite has no uses left")
	ErrMemberRevoked = errors.New("this key was revoked from the mesh")
	ErrBadRequest    = errors.New("the broker refused the join request")
	// ErrRejected is any other answer that is not a membership: a 5xx, a
	// redirect, a body that is not ours (a proxy, something that is not a
	// claudemesh broker).
	ErrRejected = errors.New("the broker did not accept the join")
	// ErrUnreachable means no HTTP answer came back: DNS, connection
	// refused, TLS, timeout.
	ErrUnreachable = errors.New("broker unreachable")
)

// Error is an answer from the broker other than 200.
type Error struct {
	Status int    // HTTP status
	Code   string // the envelope's error code; "" when the body was not ours
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

// Unwrap maps the envelope's code to the sentinel callers branch on.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeInviteUnknown:
		return ErrInviteUnknown
	case CodeInviteExpired:
		return ErrInviteExpired
	case CodeInviteUsedUp:
		return ErrInviteUsedUp
	case CodeMemberRevoked:
		return ErrMemberRevoked
	}
	if e.Code != "" && e.Status >= 400 && e.Status < 500 {
		return ErrBadRequest
	}
	return ErrRejected
}

// Joined is the membership a successful join registered.
type Joined struct {
	MeshID      string
	MemberID    string
	Slug        string
	Name        string
	DisplayName string
	BrokerURL   string // ws(s)://…/ws, derived from the invite URL
}

// Retries.
const (
	// DefaultAttempts is how often Redeem sends the same signed request when
	// no answer or a 5xx comes back. Retrying is safe: the broker answers a
	// key that already joined with its membership and uses no invite.
	DefaultAttempts = 3
	retryBackoff    = 500 * time.Millisecond
)

// Client redeems invites. The zero value is ready to use.
type Client struct {
	// HTTP is the client to send with; nil means one on
	// http.DefaultTransport. Its redirect policy is ignored: a join never
	// follows a redirect.
	HTTP *http.Client
	// Attempts bounds the sends of one Redeem; 0 means DefaultAttempts.
	Attempts int
}

// Redeem is (&Client{}).Redeem.
func Redeem(ctx context.Context, inviteURL string, id *meshcrypto.Identity, displayName string) (*Joined, error) {
	return (&Client{}).Redeem(ctx, inviteURL, id, displayName)
}

// Redeem registers id's public key under displayName with the invite at
// inviteURL and returns the membership. Errors wrap ErrBadInviteURL,
// ErrUnreachable or an *Error (see its Unwrap). Without a deadline on ctx,
// DefaultTimeout bounds the whole call.
func (c *Client) Redeem(ctx context.Context, inviteURL string, id *meshcrypto.Identity, displayName string) (*Joined, error) {
	inv, err := ParseInviteURL(inviteURL)
	if err != nil {
		return nil, err
	}
	pub := id.PublicKeyHex()
	body, err := json.Marshal(Request{Pubkey: pub, DisplayName: displayName,
		Signature: hex.EncodeToString(id.Sign(SignatureMessage(inv.Token, pub)))})
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
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
		case <-time.After(retryBackoff << (attempt - 1)):
		}
	}
}

// retryable: no answer, or a server-side failure (a proxy's 502-504
// included).
func retryable(err error) bool {
	var e *Error
	return errors.Is(err, ErrUnreachable) || errors.As(err, &e) && e.Status >= 500
}

// post sends the signed request once.
func (c *Client) post(ctx context.Context, inv *Invite, body []byte) (*Joined, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, inv.JoinURL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInviteURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		// *url.Error names the URL, and with it the token: keep only the cause.
		return nil, fmt.Errorf("%w at %s: %w", ErrUnreachable, redactURL(inv.JoinURL), unwrapURLError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("%w at %s: reading the answer: %w", ErrUnreachable, redactURL(inv.JoinURL), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, answerError(resp, raw)
	}
	var out Response
	if err := json.Unmarshal(raw, &out); err != nil || !isJSON(resp) || out.MeshID == "" || out.MemberID == "" || out.Slug == "" {
		return nil, &Error{Status: resp.StatusCode, Detail: "the answer is not a claudemesh membership; is this a claudemesh broker's invite URL?"}
	}
	if out.Name == "" {
		out.Name = out.Slug
	}
	return &Joined{MeshID: out.MeshID, MemberID: out.MemberID, Slug: out.Slug, Name: out.Name,
		DisplayName: out.DisplayName, BrokerURL: inv.BrokerURL}, nil
}

func (c *Client) httpClient() *http.Client {
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &hc
}

// answerError turns a non-200 answer into an *Error.
func answerError(resp *http.Response, raw []byte) error {
	e := &Error{Status: resp.StatusCode}
	var body ErrorBody
	if isJSON(resp) && json.Unmarshal(raw, &body) == nil && body.Error != "" {
		e.Code, e.Detail = body.Error, body.Detail
		return e
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		e.Detail = "the broker redirects the invite"
		if loc := resp.Header.Get("Location"); loc != "" {
			e.Detail += " to " + redactURL(loc) + "; use that URL if you trust it"
		}
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed:
		e.Detail = "no claudemesh join endpoint there; check the invite URL"
	default:
		e.Detail = strings.TrimSpace(http.StatusText(resp.StatusCode))
	}
	return e
}

func isJSON(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

func unwrapURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
