package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// SessionKeyRetention is how long the key file of a session that is no
// longer registered is kept after the session last used it. A session id
// registered again within it speaks with the same key, and so receives
// what a broker queued for that key while it was away (upstream's broker
// drops an undelivered message after 7 days); registered later, it gets a
// new key.
const SessionKeyRetention = 7 * 24 * time.Hour

// SessionKeysSweptSince is ConfigDir/sessions/.swept-since, which the
// first sweep of the key files makes: its modification time is when the
// sweeps began. Before then no session's end was recorded on its key file
// (TouchSessionKey), whose time was its creation.
func (p Paths) SessionKeysSweptSince() string {
	return filepath.Join(p.ConfigDir, "sessions", ".swept-since")
}

// TouchSessionKey records that session id on mesh used its key at t, as
// its key file's modification time: at the session's registration and at
// its end. A session without a key file is no error.
func (p Paths) TouchSessionKey(mesh, id string, t time.Time) error {
	if err := os.Chtimes(p.SessionKeyFile(mesh, id), t, t); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// SweepSessionKeys removes the key files (SessionKeyFile) whose session
// keep does not name and whose session last used its key before cutoff,
// and returns their paths. Nothing is removed until the sweeps began
// before cutoff (SessionKeysSweptSince): until then a file's time may be
// its creation rather than its session's end. Files it did not write (a
// name starting with a dot, or not ending in .json) are left alone.
func (p Paths) SweepSessionKeys(cutoff time.Time, keep func(mesh, id string) bool) ([]string, error) {
	since, err := p.sweptSince()
	if err != nil || !since.Before(cutoff) {
		return nil, err
	}
	dir := filepath.Dir(p.SessionKeysSweptSince())
	meshes, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, m := range meshes {
		if !m.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, m.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			id, ok := strings.CutSuffix(f.Name(), ".json")
			if !ok || strings.HasPrefix(id, ".") || !f.Type().IsRegular() || keep(m.Name(), id) {
				continue
			}
			info, err := f.Info()
			if err != nil || !info.ModTime().Before(cutoff) {
				continue // gone meanwhile, or used within the retention
			}
			path := filepath.Join(dir, m.Name(), f.Name())
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, path)
		}
	}
	return removed, errors.Join(errs...)
}

// sweptSince is SessionKeysSweptSince's time; the first call makes the
// file.
func (p Paths) sweptSince() (time.Time, error) {
	path := p.SessionKeysSweptSince()
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
			err = WriteFileAtomic(path, nil, 0o600)
		}
		if err == nil {
			info, err = os.Stat(path)
		}
	}
	if err != nil {
		return time.Time{}, err
	}
	return info.ModTime(), nil
}
