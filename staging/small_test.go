package staging

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestTornSidecarIsRepaired: a worker stopped while gocloud's fileblob rewrote an attribute
// sidecar leaves it empty or torn beside a whole data file; reads of the documents rewritten in
// place (state documents, slot marks) must still succeed, with the data file's content.
func TestTornSidecarIsRepaired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sidecars := map[string][]byte{
		"empty": nil,
		"torn":  []byte(`{"user.cache_control":"","user.content_type":"appl`),
	}
	for name, sidecar := range sidecars {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st, err := OpenDir(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			doc := []byte(`{"schema":"v2"}`)
			if err := st.PutState(ctx, "p1", "schema shop.items", doc); err != nil {
				t.Fatal(err)
			}
			mark := SlotMark{Slot: "sluice_p1", Since: 10, Confirmed: 42}
			if err := st.WriteSlotMark(ctx, "p1", mark); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{stateName("p1", "schema shop.items"), markName("p1", "sluice_p1")} {
				path := filepath.Join(dir, filepath.FromSlash(key)) + ".attrs"
				if _, err := os.Stat(path); err != nil {
					t.Fatalf("sidecar of %s: %v", key, err)
				}
				if err := os.WriteFile(path, sidecar, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := st.GetState(ctx, "p1", "schema shop.items")
			if err != nil {
				t.Fatalf("reading a state document beside an %s sidecar: %v", name, err)
			}
			if !bytes.Equal(got, doc) {
				t.Errorf("state document = %s, want %s", got, doc)
			}
			m, ok, err := st.ReadSlotMark(ctx, "p1", "sluice_p1")
			if err != nil || !ok || m != mark {
				t.Errorf("slot mark beside an %s sidecar = %+v, %v, %v; want %+v", name, m, ok, err, mark)
			}
		})
	}
}
