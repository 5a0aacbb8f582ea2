package ipc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/claudemesh/claudemesh-go/messages"
)

// The detection handshake's bounds (spec §8.1).
const (
	// HandshakeConnect bounds the connect to the socket.
	HandshakeConnect = 100 * time.Millisecond
	// HandshakeAnswer bounds the GET /v1/version answer once connected.
	HandshakeAnswer = 2 * time.Second
)

// UnusableDaemonError is a daemon that answered the detection handshake in
// a way this client cannot use (not a claudemesh answer, another ipc_api).
type UnusableDaemonError struct{ Err error }

func (u *UnusableDaemonError) Error() string { return u.Err.Error() }
func (u *UnusableDaemonError) Unwrap() error { return u.Err }

// Handshake is the detection handshake (spec §8.1): connect to the socket
// within HandshakeConnect, then GET /v1/version on that connection within
// HandshakeAnswer. The pid file is never consulted. An answer that is not
// a version is an *UnusableDaemonError.
func Handshake(sock string) (*messages.Version, error) {
	conn, err := net.DialTimeout("unix", sock, HandshakeConnect)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(HandshakeAnswer))
	req, err := http.NewRequest(http.MethodGet, "http://localhost/v1/version", nil)
	if err != nil {
		return nil, err
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/version answered %d", resp.StatusCode)
	}
	var v messages.Version
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, &UnusableDaemonError{fmt.Errorf("GET /v1/version on %s: %w", sock, err)}
	}
	return &v, nil
}

// Detect is the handshake and the identification of the daemon that
// answered: ours, or upstream's (Client.Identify). Any failure means no
// usable daemon (*UnusableDaemonError when something did answer).
func Detect(sock string) (*Daemon, error) {
	v, err := Handshake(sock)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), HandshakeAnswer)
	defer cancel()
	d, err := NewClient(sock).Identify(ctx, v)
	if err != nil {
		return nil, &UnusableDaemonError{fmt.Errorf("%s: %w", sock, err)}
	}
	return d, nil
}

// ProbeOurs is the handshake answered by our own daemon, the one that
// names its pid (the lifecycle commands signal it).
func ProbeOurs(sock string) (*messages.Version, error) {
	v, err := Handshake(sock)
	if err != nil {
		return nil, err
	}
	if v.IPCAPI == "" || v.PID == 0 {
		return nil, errors.New("GET /v1/version: not this claudemesh's daemon (no ipc_api or pid)")
	}
	return v, nil
}
