package staging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/sluicecdc/sluice/batch"
)

var testSource = batch.SourceID{SystemID: "7312345678901234567", Timeline: 1, Slot: "sluice_p1"}

func sp(lsn uint64, seq uint32) batch.SourcePosition {
	return batch.SourcePosition{Source: testSource, Position: batch.Position{LSN: lsn, Seq: seq}}
}

func ref(table string, lo, hi uint64) BatchRef {
	return BatchRef{
		Pipeline: "p1",
		Table:    batch.TableName{Schema: "shop", Name: table},
		Lo:       sp(lo, 0),
		Hi:       sp(hi, 3),
		Rows:     int64(hi - lo),
		Phase:    batch.PhaseStream,
	}
}

// stores returns one store per backend: a local directory and an in-process S3 (gofakes3).
func stores(t *testing.T) map[string]*Store {
	t.Helper()
	ctx := context.Background()
	dir, err := OpenDir(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dir.Close() })

	backend := s3mem.New()
	if err := backend.CreateBucket("staging"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	s3, err := Open(ctx, "s3://staging/sluice/staging?region=us-east-1&endpoint="+srv.URL, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s3.Close() })
	return map[string]*Store{"dir": dir, "s3": s3}
}

func TestStore(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			// Staged out of order, across two tables.
			put := func(r BatchRef, body string) BatchRef {
				t.Helper()
				got, err := st.Put(ctx, r, bytes.NewBufferString(body))
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			b3 := put(ref("orders", 0x3_0000_0000, 0x3_0000_0100), "third")
			b1 := put(ref("orders", 0x100, 0x200), "first")
			b2 := put(ref("orders", 0x201, 0x1_0000_0000), "second")
			other := put(ref("customers", 0x50, 0x60), "other table")
			if b1.Bytes != int64(len("first")) || b1.URI == "" {
				t.Fatalf("put returned %+v, want Bytes 5 and a URI", b1)
			}

			t.Run("list is in position order with metadata", func(t *testing.T) {
				got, err := st.List(ctx, "p1", b1.Table)
				if err != nil {
					t.Fatal(err)
				}
				want := []BatchRef{b1, b2, b3}
				if len(got) != len(want) {
					t.Fatalf("listed %d batches, want %d: %+v", len(got), len(want), got)
				}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("batch %d = %+v, want %+v", i, got[i], want[i])
					}
				}
			})

			t.Run("list after a position", func(t *testing.T) {
				got, err := st.ListAfter(ctx, "p1", b1.Table, b2.Hi, true)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || got[0] != b3 {
					t.Fatalf("after %s got %+v, want only %s", b2.Hi, got, b3)
				}
				foreign := b2.Hi
				foreign.Source.Slot = "another_slot"
				if _, err := st.ListAfter(ctx, "p1", b1.Table, foreign, true); !errors.Is(err, batch.ErrDifferentSource) {
					t.Fatalf("listing after a position of another source: err = %v, want ErrDifferentSource", err)
				}
			})

			t.Run("read and idempotent put", func(t *testing.T) {
				again := put(ref("orders", 0x100, 0x200), "first, re-staged")
				if again.URI != b1.URI {
					t.Fatalf("re-staging the same range gave URI %s, want %s", again.URI, b1.URI)
				}
				data, err := st.ReadAll(ctx, b1)
				if err != nil {
					t.Fatal(err)
				}
				if string(data) != "first, re-staged" {
					t.Fatalf("read %q after re-staging", data)
				}
				all, err := st.List(ctx, "p1", b1.Table)
				if err != nil {
					t.Fatal(err)
				}
				if len(all) != 3 {
					t.Fatalf("re-staging created a second object: %d batches", len(all))
				}
			})

			t.Run("pipeline listing and acknowledge", func(t *testing.T) {
				all, err := st.ListPipeline(ctx, "p1")
				if err != nil {
					t.Fatal(err)
				}
				if len(all) != 4 || all[0].Table != other.Table {
					t.Fatalf("pipeline listing = %+v, want 4 batches, customers first", all)
				}
				if err := st.Acknowledge(ctx, b1); err != nil {
					t.Fatal(err)
				}
				if err := st.Acknowledge(ctx, b1); err != nil {
					t.Fatalf("acknowledging twice: %v", err)
				}
				if _, err := st.ReadAll(ctx, b1); !errors.Is(err, ErrNotFound) {
					t.Fatalf("reading an acknowledged batch: err = %v, want ErrNotFound", err)
				}
				left, err := st.List(ctx, "p1", b1.Table)
				if err != nil {
					t.Fatal(err)
				}
				if len(left) != 2 || left[0] != b2 {
					t.Fatalf("after acknowledging %s: %+v", b1, left)
				}
			})

			t.Run("foreign URI", func(t *testing.T) {
				r := b3
				r.URI = "s3://elsewhere/" + objectName(r)
				if _, err := st.ReadAll(ctx, r); !errors.Is(err, ErrForeignURI) {
					t.Fatalf("err = %v, want ErrForeignURI", err)
				}
			})
		})
	}
}

func TestPutRejectsInvalidRef(t *testing.T) {
	t.Parallel()
	st := stores(t)["dir"]
	bad := ref("orders", 0x200, 0x100)
	bad.Phase = "later"
	_, err := st.Put(context.Background(), bad, bytes.NewBufferString("x"))
	if err == nil {
		t.Fatal("staging a batch whose hi is before lo succeeded")
	}
	for _, want := range []string{"hi 0/100:3 is before lo 0/200:0", `phase "later"`} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestOpenURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		url     string
		wantURI string
		wantErr string
	}{
		{url: dir, wantURI: "file://" + dir + "/"},
		{url: "file://" + dir + "/x", wantURI: "file://" + dir + "/x/"},
		{url: "s3://bucket/a/b?endpoint=http://127.0.0.1:1&path_style=true", wantURI: "s3://bucket/a/b/"},
		{url: "s3://bucket?path_style=maybe", wantErr: "path_style"},
		{url: "s3://bucket?regoin=eu-west-1", wantErr: `unknown query parameter "regoin"; the parameters are endpoint, region, path_style`},
		{url: "s3://bucket?use_path_style=true", wantErr: `unknown query parameter "use_path_style"`},
		{url: "s3://bucket?region=a&region=b", wantErr: `"region" is given 2 times`},
		{url: "gs://bucket", wantErr: `scheme "gs" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			st, err := Open(context.Background(), tt.url, "k", "s")
			if tt.wantErr != "" {
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tt.wantErr)) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if st.URI() != tt.wantURI {
				t.Fatalf("URI %s, want %s", st.URI(), tt.wantURI)
			}
		})
	}
}

// TestListPipelineWhileBatchesAreAcknowledged lists a pipeline while its batches are being
// acknowledged, as the reader's held tracker does while tables commit: a file that vanishes
// during the listing must not fail it (a local store's listing stats every entry it read).
func TestListPipelineWhileBatchesAreAcknowledged(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			const n = 600
			refs := make([]BatchRef, n)
			for i := range refs {
				r, err := st.Put(ctx, ref(fmt.Sprintf("t%d", i%7), uint64(i*10+1), uint64(i*10+9)), bytes.NewBufferString("rows"))
				if err != nil {
					t.Fatal(err)
				}
				refs[i] = r
			}
			done := make(chan error, 1)
			go func() {
				for _, r := range refs {
					if err := st.Acknowledge(ctx, r); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for listed := n; listed > 0; {
				got, err := st.ListPipeline(ctx, "p1")
				if err != nil {
					t.Fatalf("listing while batches are acknowledged: %v", err)
				}
				if len(got) > listed {
					t.Fatalf("listed %d batches after %d: acknowledged batches came back", len(got), listed)
				}
				listed = len(got)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestListDirMatchesTheBucket checks the local store's directory listing (listDir) against the
// bucket's own listing of the same tree (listOnce), for every prefix a listing uses: tables of
// names that need escaping, two sources, a stranded temporary file and a file that is not a
// batch, with sizes and metadata and without.
func TestListDirMatchesTheBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	st, err := OpenDir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other := batch.SourceID{SystemID: "7312345678901234567", Timeline: 2, Slot: "sluice_p1"}
	var refs []BatchRef
	for i, table := range []string{"orders", "Weird Table", "ü.x"} {
		for j := range 3 {
			r := ref(table, uint64(100*i+10*j+1), uint64(100*i+10*j+9))
			if j == 2 {
				r.Lo.Source, r.Hi.Source = other, other
			}
			if _, err := st.Put(ctx, r, bytes.NewBufferString(fmt.Sprintf("%0*d", 10*i+j+1, 0))); err != nil {
				t.Fatal(err)
			}
			refs = append(refs, r)
		}
	}
	srcDir := filepath.Dir(filepath.Join(root, filepath.FromSlash(objectName(refs[0]))))
	for _, stray := range []string{"0000000000000001-0000000000000002.batch.tmp123", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(srcDir, stray), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	prefixes := []string{pipelinePrefix("p1")}
	for _, r := range refs {
		prefixes = append(prefixes, tablePrefix(r.Pipeline, r.Table))
	}
	for _, prefix := range prefixes {
		for _, attrs := range []bool{false, true} {
			want, err := st.listOnce(ctx, prefix, attrs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.listDir(ctx, prefix, attrs, true)
			if err != nil {
				t.Fatal(err)
			}
			sortRefs(want)
			sortRefs(got)
			if fmt.Sprint(got) != fmt.Sprint(want) || !reflect.DeepEqual(got, want) {
				t.Errorf("prefix %s, metadata %v: the directory listing has %d refs %+v, the bucket's %d %+v", prefix, attrs, len(got), got, len(want), want)
			}
			noSizes, err := st.listDir(ctx, prefix, attrs, false)
			if err != nil || len(noSizes) != len(want) {
				t.Errorf("prefix %s without sizes: %d refs (%v), want %d", prefix, len(noSizes), err, len(want))
			}
		}
	}
}

// sortRefs sorts refs by URI.
func sortRefs(refs []BatchRef) {
	slices.SortFunc(refs, func(a, b BatchRef) int { return strings.Compare(a.URI, b.URI) })
}
