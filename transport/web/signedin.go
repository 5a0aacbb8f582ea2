package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/claudemesh/claudemesh-go/config"
)

// signedIn is the list of signed-in browsers: each sign-in's nonce, with
// when its cookie expires. A cookie counts only while its nonce is listed,
// so a sign-out, which takes it off, ends the cookie wherever it was
// copied to. The list is kept in a file (Options.SignedInFile), so that a
// daemon restart signs no browser out.
type signedIn struct {
	file string // "": the list lives in memory only

	mu    sync.Mutex
	until map[string]int64         // nonce → the cookie's expiry, Unix seconds
	ended map[string]chan struct{} // nonce → closed when its sign-in ends (its event streams end)
}

// signedInFile is the file's form.
type signedInFile struct {
	Version int              `json:"version"`
	Nonces  map[string]int64 `json:"nonces"`
}

// loadSignedIn reads the list of file. A missing file is an empty list;
// so is one that does not parse (every browser signs in again), with the
// error.
func loadSignedIn(file string) (*signedIn, error) {
	s := &signedIn{file: file, until: map[string]int64{}, ended: map[string]chan struct{}{}}
	if file == "" {
		return s, nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	var f signedInFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 1 {
		return s, fmt.Errorf("%s does not parse (version %d, %v): every browser signs in again", file, f.Version, err)
	}
	maps.Copy(s.until, f.Nonces)
	return s, nil
}

// has reports whether nonce is signed in at now.
func (s *signedIn) has(nonce string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.until[nonce]
	return ok && now.Unix() < until
}

// endOf is closed when the sign-in of nonce ends: at once when it is not
// signed in.
func (s *signedIn) endOf(nonce string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, in := s.until[nonce]; !in {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	ch, ok := s.ended[nonce]
	if !ok {
		ch = make(chan struct{})
		s.ended[nonce] = ch
	}
	return ch
}

// add lists a sign-in whose cookie expires at until.
func (s *signedIn) add(nonce string, until int64, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.until[nonce] = until
	return s.save(now)
}

// remove ends the sign-in of nonce.
func (s *signedIn) remove(nonce string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.until, nonce)
	s.end(nonce)
	return s.save(now)
}

// end closes the channel of nonce's end, if one was asked for. Under mu.
func (s *signedIn) end(nonce string) {
	if ch, ok := s.ended[nonce]; ok {
		close(ch)
		delete(s.ended, nonce)
	}
}

// save drops the sign-ins expired at now and writes the list. Under mu.
func (s *signedIn) save(now time.Time) error {
	for nonce, until := range s.until {
		if now.Unix() >= until {
			delete(s.until, nonce)
			s.end(nonce)
		}
	}
	if s.file == "" {
		return nil
	}
	b, err := json.Marshal(signedInFile{Version: 1, Nonces: s.until})
	if err != nil {
		return err
	}
	return config.WriteFileAtomic(s.file, append(b, '\n'), 0o600)
}
