package staging

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLocalStoreIsPrivate opens a store on a directory that exists with open modes, holding a
// stranded temporary file, a fresh one and a readable staged file: afterwards every directory
// is 0700 and every file 0600 (a newly staged batch too, whatever the umask), the stranded
// temporary file is gone and the fresh one (another worker's write in progress) is kept.
func TestLocalStoreIsPrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "staging")
	sub := filepath.Join(dir, "p1", "public.t")
	if err := os.MkdirAll(sub, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "p1"), sub} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := filepath.Join(sub, "x.arrow.18a2b3c4d5e6f7.tmp")
	fresh := filepath.Join(sub, "y.arrow.18a2b3c4d5e6f8.tmp")
	staged := filepath.Join(sub, "z.arrow")
	for _, f := range []string{old, fresh, staged} {
		if err := os.WriteFile(f, []byte("rows"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(old, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}

	st, err := OpenDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Put(ctx, ref("t", 10, 20), bytes.NewReader([]byte("arrow"))); err != nil {
		t.Fatal(err)
	}

	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the stranded temporary file is still there (stat: %v)", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the fresh temporary file (a write in progress) was removed: %v", err)
	}
	files := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fileMode
		if d.IsDir() {
			want = dirMode
		} else {
			files++
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s has mode %o, want %o", path, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 { // fresh, staged, the new batch (and its metadata sidecar)
		t.Errorf("found %d files, want the new batch among them", files)
	}
}
