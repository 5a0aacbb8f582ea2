package config

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data, with mode mode, so that a
// reader, or the machine after a crash, finds the old file or the new one
// and never part of either: data goes to a temp file beside path
// (".<name>.*.tmp"), which is fsynced, renamed over path, and then the
// directory is fsynced so that the rename is on disk too. When it fails
// before the rename, path is as it was and the temp file is removed (only
// a crash can leave one). It is the one way claudemesh writes a small file
// in place: config.json, local-token, the daemon's http.port, a service
// unit, Claude Code's settings.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := writeSynced(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// writeSynced gives f its mode and content, fsyncs it and closes it.
func writeSynced(f *os.File, data []byte, mode os.FileMode) error {
	err := f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir fsyncs directory dir: a rename in it is durable only then.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
