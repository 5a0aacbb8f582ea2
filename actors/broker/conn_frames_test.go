package broker

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/claudemesh/claudemesh-go/messages"
	"github.com/claudemesh/claudemesh-go/persistence/broker"
)

// TestConnTakesEveryClientFrame walks the frame types a client may send
// the broker: each Type* constant of package messages that
// messages.DecodeClientFrame decodes. Each but hello and session_hello
// (the hello gate's, answered already_authenticated after it) is taken by
// an entry of clientFrames, and each entry takes a frame the decoder
// returns. A type listed twice stops the package loading (frameTable).
func TestConnTakesEveryClientFrame(t *testing.T) {
	helloGate := map[string]bool{messages.TypeHello: true, messages.TypeSessionHello: true}
	decoded := map[reflect.Type]bool{}
	for name, typ := range messageTypes(t) {
		v, err := messages.DecodeClientFrame([]byte(`{"type":` + strconv.Quote(typ) + `}`))
		var fe *messages.FrameError
		switch {
		case errors.As(err, &fe) && fe.Code == messages.FrameUnknownType:
			continue // a frame the broker sends, or another conversation's type
		case err != nil:
			t.Errorf("messages.%s (%q): %v", name, typ, err)
			continue
		}
		frame := reflect.TypeOf(v)
		decoded[frame] = true
		switch taken := clientFrames[frame] != nil; {
		case helloGate[typ] && taken:
			t.Errorf("%s (%v) has an entry in clientFrames: after the hello it is answered already_authenticated", typ, frame)
		case !helloGate[typ] && !taken:
			t.Errorf("client frame %s (%v) is taken by no entry of clientFrames: add one in its feature's conn_*.go", typ, frame)
		}
	}
	if !decoded[reflect.TypeFor[*messages.SendFrame]()] || !decoded[reflect.TypeFor[*messages.HelloFrame]()] {
		t.Fatalf("the walk of messages' Type* constants decoded no send or hello frame: %v", decoded)
	}
	for frame := range clientFrames {
		if !decoded[frame] {
			t.Errorf("clientFrames has an entry for %v, which messages.DecodeClientFrame never returns", frame)
		}
	}
}

// messageTypes reads the Type* string constants of package messages from
// its source, by name.
func messageTypes(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "messages", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("package messages' files: %v, %v", files, err)
	}
	types := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				addTypeConstants(t, fset, gd, types)
			}
		}
	}
	return types
}

// addTypeConstants adds decl's constants named Type* to types; each must
// be a string literal.
func addTypeConstants(t *testing.T, fset *token.FileSet, decl *ast.GenDecl, types map[string]string) {
	t.Helper()
	for _, spec := range decl.Specs {
		vs := spec.(*ast.ValueSpec)
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Type") || !name.IsExported() {
				continue
			}
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Fatalf("%s: messages.%s is not a string literal: read its value here", fset.Position(name.Pos()), name.Name)
			}
			types[name.Name], _ = strconv.Unquote(lit.Value)
		}
	}
}

// TestFrameTableRefusesDuplicates: two entries for one frame type stop
// the table being built.
func TestFrameTableRefusesDuplicates(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "*messages.ListLocksFrame listed twice") {
			t.Errorf("a frame type listed twice: %v, want a panic naming it", r)
		}
	}()
	frameTable(lockFrames, frames{answers(func(*conn, *messages.ListLocksFrame) {})})
}

// TestSecondHello: a hello after the accepted one is no entry's frame,
// answered already_authenticated; the connection stays up.
func TestSecondHello(t *testing.T) {
	e := startBroker(t, broker.Options{Dir: t.TempDir()}, noLimit)
	alice := e.member("alice")
	c := e.connect(alice, "a")
	c.send(e.hello(alice, "b"))
	if f := c.next("error"); f["code"] != "already_authenticated" {
		t.Errorf("a second hello: %v, want already_authenticated", f)
	}
	c.send(map[string]any{"type": messages.TypeListLocks, "_reqId": "r"})
	if f := c.next(messages.TypeLockList); f["_reqId"] != "r" {
		t.Errorf("list_locks after a second hello: %v", f)
	}
}
