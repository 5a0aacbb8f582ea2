package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/transport/wsclient"
)

// linkFrames are the broker frames the connection takes without a relay:
// the handshake's (wsclient.Dial reads them), a push (the reader hands it
// to the inbox), and the two that answer a request of any relay, found by
// the id they name (an ack without one is a send's, for the dispatcher).
var linkFrames = map[reflect.Type]string{
	reflect.TypeFor[*messages.HelloAckFrame]():                   "the handshake",
	reflect.TypeFor[*messages.FeatureNegotiationResponseFrame](): "the handshake",
	reflect.TypeFor[*messages.FeatureNegotiationFailedFrame]():   "the handshake",
	reflect.TypeFor[*messages.PushFrame]():                       "the inbox",
	reflect.TypeFor[*messages.AckFrame]():                        "the dispatcher, or the relay its _reqId names",
	reflect.TypeFor[*messages.ErrorFrame]():                      "the relay its _reqId names",
}

// relayedMessages are the actor messages a broker connection hands to its
// relays: the daemon's requests, the relays' own timers, and the store's
// replies to them.
var relayedMessages = []any{
	&messages.KeptNames{}, &messages.KeptPeers{},
	&messages.ListPeers{}, &messages.SetProfile{},
	&messages.TopicRequest{}, &messages.ResolveTopic{}, &messages.TopicNames{}, &topicExpired{},
	&messages.StateRequest{}, &stateExpired{},
	&messages.SkillRequest{}, &skillExpired{},
	&messages.MemoryRequest{}, &memoryExpired{},
	&messages.NodesRequest{}, &nodesExpired{},
	&messages.PullHeld{}, &inboxFlushed{}, &heldExpired{},
	&messages.LockRequest{}, &lockExpired{}, &lockRetry{}, &lockRenewal{}, &messages.HeldLockList{}, &messages.LockRecorded{},
	&messages.ReservationRequest{}, &resvExpired{}, &resvRetry{}, &resvRenewal{}, &messages.HeldReservationList{},
	&messages.ReservationRecorded{},
}

// TestBrokerConnRoutesEveryFrame walks every frame type the broker can
// send (every Type* constant of package messages the client's decoder
// turns into a frame) and every message a connection hands to its relays:
// each is taken by the link itself or by exactly one relay, and every type
// a relay takes is one of them. A relay left out of the table fails it.
func TestBrokerConnRoutesEveryFrame(t *testing.T) {
	table := newRelayTable((&BrokerConn{}).relayList())
	claimed := map[reflect.Type]bool{}
	for _, typ := range brokerFrameTypes(t) {
		v, err := wsclient.DecodeBrokerFrame([]byte(`{"type":` + strconv.Quote(typ) + `}`))
		if err != nil {
			t.Errorf("decode %q: %v", typ, err)
			continue
		}
		rt := reflect.TypeOf(v)
		switch {
		case rt == reflect.TypeFor[*wsclient.UnknownFrame]():
			continue // not the broker's to send, or nothing the daemon reads
		case linkFrames[rt] != "":
		case table.frames[rt] == nil:
			t.Errorf("frame %q (%v): no relay takes it", typ, rt)
		}
		claimed[rt] = true
	}
	for rt := range table.frames {
		if !claimed[rt] {
			t.Errorf("a relay takes %v, which the broker never sends", rt)
		}
	}
	listed := map[reflect.Type]bool{}
	for _, m := range relayedMessages {
		rt := reflect.TypeOf(m)
		listed[rt] = true
		if table.messages[rt] == nil {
			t.Errorf("message %v: no relay takes it", rt)
		}
	}
	for rt := range table.messages {
		if !listed[rt] {
			t.Errorf("a relay takes %v: list it in relayedMessages", rt)
		}
	}
	for _, r := range table.all {
		if r.refused != nil || r.acked != nil {
			if r.ids == "" {
				t.Errorf("a relay takes answers by id without an id prefix")
			}
		}
	}
}

// brokerFrameTypes are the values of package messages' Type* constants.
func brokerFrameTypes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../messages/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "Type") || i >= len(spec.Values) {
					continue
				}
				if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					types = append(types, s)
				}
			}
			return true
		})
	}
	if len(types) < 40 {
		t.Fatalf("found %d Type* constants in package messages: the walk is broken", len(types))
	}
	return types
}

// TestRelayRoutesByID: an answer finds the relay whose request it names,
// and nothing else.
func TestRelayRoutesByID(t *testing.T) {
	table := newRelayTable((&BrokerConn{}).relayList())
	for _, id := range []string{"", "st", "xx-1", "-1", "st1"} {
		if r := table.owner(id); r != nil {
			t.Errorf("owner(%q) = %q, want none", id, r.ids)
		}
	}
	for _, r := range table.all {
		if r.ids == "" {
			continue
		}
		if got := table.owner(r.ids + "-7"); got == nil || got.ids != r.ids {
			t.Errorf("owner(%s-7) is not the relay of %s", r.ids, r.ids)
		}
	}
}
