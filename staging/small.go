package staging

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
)

// readSmall reads an object that is rewritten in place (a state document, a slot mark).
//
// In a local store, gocloud's fileblob keeps an object's attributes in a "<name>.attrs" sidecar
// that it rewrites by truncating it before the data file's atomic rename. A worker stopped at
// that moment leaves an empty or torn sidecar beside a whole data file, and every later read
// fails on the sidecar (EOF). The data file is whole (old or new: both are safe to read, since
// each document is written before what it records takes effect), so readSmall removes a sidecar
// that is not valid JSON and reads once more. Staged batches are written once under new names
// and never go through here.
func (s *Store) readSmall(ctx context.Context, key string) ([]byte, error) {
	data, err := s.bucket.ReadAll(ctx, key)
	if err == nil || !s.repairSidecar(key) {
		return data, err
	}
	return s.bucket.ReadAll(ctx, key)
}

// repairSidecar removes key's attribute sidecar in a local store when it is not valid JSON, and
// reports whether it did.
func (s *Store) repairSidecar(key string) bool {
	if s.dir == "" {
		return false
	}
	path := filepath.Join(s.dir, filepath.FromSlash(key)) + ".attrs"
	b, err := os.ReadFile(path)
	if err != nil || json.Valid(b) {
		return false
	}
	return os.Remove(path) == nil
}
