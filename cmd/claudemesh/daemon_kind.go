package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/claudemesh/claudemesh-go/transport/ipc"
)

// connectDaemon returns a client of the running daemon (daemonClient) and
// the daemon it found there, ours or upstream's, once it has checked that
// the daemon serves every ipc feature the command (what) needs: lists it,
// or answers its route when asked (ipc.Client.Require).
func connectDaemon(what string, features ...string) (*ipc.Client, *ipc.Daemon, error) {
	client, err := daemonClient()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := client.Daemon(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range features {
		if err := client.Require(ctx, d, f, what); err != nil {
			return nil, nil, err
		}
	}
	return client, d, nil
}

// withDaemon returns the JSON object obj with "daemon" (which daemon
// answered) as its first member; anything but an object is returned as it
// is.
func withDaemon(obj []byte, d *ipc.Daemon) []byte {
	obj = bytes.TrimSpace(obj)
	if d == nil || len(obj) < 2 || obj[0] != '{' {
		return obj
	}
	name, err := json.Marshal(d)
	if err != nil {
		return obj
	}
	out := append([]byte(`{"daemon":`), name...)
	if rest := bytes.TrimSpace(obj[1:]); rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, obj[1:]...)
}

// printWithDaemon prints v as one line of JSON with "daemon" added
// (withDaemon).
func printWithDaemon(v any, d *ipc.Daemon) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(withDaemon(b, d), '\n'))
	return err
}

// listWithDaemon is items as JSON objects, each with "daemon" added: the
// form of a --json list (a JSON array) that names the daemon.
func listWithDaemon[T any](items []T, d *ipc.Daemon) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(items))
	for i := range items {
		b, err := json.Marshal(items[i])
		if err != nil {
			return nil, err
		}
		out[i] = withDaemon(b, d)
	}
	return out, nil
}
