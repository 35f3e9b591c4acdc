package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layoutPath is the page that lists every top-level folder with its one job.
const layoutPath = "../docs/layout.md"

// TestLayoutNamesEveryFolder fails when a top-level folder of the repository that holds Go code
// (in it or below it) is not named in docs/layout.md as `folder/`, or when a row of the page
// names a folder that does not exist, so that the page cannot fall behind the tree.
func TestLayoutNamesEveryFolder(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(layoutPath)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		hasGo, err := holdsGo(filepath.Join("..", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if !hasGo {
			continue
		}
		checked++
		if name := "`" + e.Name() + "/`"; !strings.Contains(string(page), name) {
			t.Errorf("%s does not name %s, a top-level folder with Go code: add it, with its one job, where data reaches it", layoutPath, name)
		}
	}
	if checked == 0 {
		t.Fatal("no top-level folder with Go code found: the test reads the wrong directory")
	}
	// And the other way: every folder a row of the page names exists.
	for _, line := range strings.Split(string(page), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		for _, f := range strings.Split(cells[1], "`") {
			if !strings.HasSuffix(f, "/") {
				continue
			}
			if st, err := os.Stat(filepath.Join("..", f)); err != nil || !st.IsDir() {
				t.Errorf("%s names %s, which is not a folder of the repository: remove or rename its row", layoutPath, f)
			}
		}
	}
}

// holdsGo reports whether dir or a folder below it holds a .go file (testdata aside).
func holdsGo(dir string) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "testdata":
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(d.Name(), ".go"):
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
}
