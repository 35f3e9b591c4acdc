package catalogwatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// TestRecordLayout pins the partition records as they persist in a staging directory: their
// object names and their JSON. A worker of the next release reads the records this one wrote,
// so a change here is a change of the persisted format.
func TestRecordLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := staging.OpenDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := source.Storage{TableStorage: rootStorage, Partitioned: true, Partitions: []source.Partition{attached(part("ev_a", 1, 11), 700)}}
	if err := RecordSnapshot(ctx, store, "p-1", root, "s1@0/10:0", st, at); err != nil {
		t.Fatal(err)
	}
	w := &Watcher{Pipeline: "p-1", Tables: []Table{{Name: root}}, Store: store, Now: func() time.Time { return at }}
	if err := w.Resyncing(ctx, root, "TRUNCATE"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"base", "p-1/_state/partitions%2Fpublic%2Eev%2Fbase.json",
			`{"table":{"schema":"public","name":"ev"},"epoch":"s1@0/10:0","storage":{"oid":100,"relfilenode":0,"columns":[{"num":1,"name":"id","xmin":5,"type_oid":20,"type_mod":-1}]},"partitions":[{"table":{"schema":"public","name":"ev_a"},"oid":1,"relfilenode":11,"attached":700}],"recorded":"2026-01-02T03:04:05Z"}`},
		{"reader", "p-1/_state/partitions%2Fpublic%2Eev%2Freader.json",
			`{"table":{"schema":"public","name":"ev"},"epoch":"s1@0/10:0","storage":{"oid":100,"relfilenode":0,"columns":[{"num":1,"name":"id","xmin":5,"type_oid":20,"type_mod":-1}]},"partitions":[{"table":{"schema":"public","name":"ev_a"},"oid":1,"relfilenode":11,"attached":700}],"recorded":"2026-01-02T03:04:05Z","pending":"TRUNCATE"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(tt.path)))
			if err != nil {
				t.Fatalf("the %s record is not at %s: %v", tt.name, tt.path, err)
			}
			if string(got) != tt.want {
				t.Errorf("%s record =\n%s\nwant\n%s", tt.name, got, tt.want)
			}
		})
	}
}
