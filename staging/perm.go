package staging

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Modes of a local store: staged files hold row data, so only the worker's user reads them,
// whatever the umask or the modes a pre-existing directory had.
const (
	fileMode os.FileMode = 0o600
	dirMode  os.FileMode = 0o700
	// strandedAfter is how long a temporary file (a write in progress: <name>.<hex>.tmp) goes
	// unmodified before a starting store takes it for a write that died with its process. A
	// live write touches its file far more often; another worker sharing the directory keeps its own.
	strandedAfter = 10 * time.Minute
	tmpSuffix     = ".tmp"
)

// privateFile sets a local store's file, reached through a gocloud writer's As, to fileMode
// before anything is written to it.
func privateFile(as func(any) bool) error {
	var f *os.File
	if !as(&f) || f == nil {
		return nil
	}
	if err := f.Chmod(fileMode); err != nil {
		return fmt.Errorf("making staged file %s private: %w", f.Name(), err)
	}
	return nil
}

// secureDir sets dir and every directory below it to dirMode and every file to fileMode, and
// removes the temporary files of writes stranded before now-strandedAfter. It returns how many
// it removed.
func secureDir(dir string, now time.Time) (int, error) {
	removed := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // acknowledged while walking
			}
			return err
		}
		if d.IsDir() {
			return os.Chmod(path, dirMode)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if strings.HasSuffix(d.Name(), tmpSuffix) && now.Sub(info.ModTime()) > strandedAfter {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			removed++
			return nil
		}
		if info.Mode().Perm() != fileMode {
			if err := os.Chmod(path, fileMode); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("securing staging directory %s (modes %o and %o, stranded temporary files): %w", dir, dirMode, fileMode, err)
	}
	return removed, nil
}
