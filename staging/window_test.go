package staging

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestListWindow checks the windows of staged batches a table gets, on every kind of store: their
// bounds (count, bytes, position) and that each ref carries its rows, phase, first commit and size.
func TestListWindow(t *testing.T) {
	t.Parallel()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var all []BatchRef
			first := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
			for i := range 10 {
				r := ref("orders", uint64(i*100+1), uint64(i*100+100))
				r.FirstCommit = first.Add(time.Duration(i) * time.Second)
				got, err := st.Put(ctx, r, bytes.NewBufferString(strings.Repeat("x", i+1))) // sizes differ
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, got)
			}
			one, _ := json.Marshal(all[0])
			cases := []struct {
				name      string
				after     int // index of the committed batch; -1 for none
				limit     int
				maxBytes  int
				wantFirst int
				wantN     int
				wantTotal int
			}{
				{"first window", -1, 4, 0, 0, 4, 10},
				{"after a position", 5, 4, 0, 6, 4, 4},
				{"last partial window", 7, 4, 0, 8, 2, 2},
				{"nothing left", 9, 4, 0, 0, 0, 0},
				{"bounded by bytes", -1, 100, 3*len(one) + 10, 0, 3, 10},
				{"at least one ref whatever the bytes", -1, 100, 1, 0, 1, 10},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					after, has := all[0].Hi, false
					if tc.after >= 0 {
						after, has = all[tc.after].Hi, true
					}
					w, err := st.ListWindow(ctx, "p1", all[0].Table, after, has, tc.limit, tc.maxBytes)
					if err != nil {
						t.Fatal(err)
					}
					if len(w.Refs) != tc.wantN || w.Staged != tc.wantTotal {
						t.Fatalf("window of %d refs of %d staged, want %d of %d", len(w.Refs), w.Staged, tc.wantN, tc.wantTotal)
					}
					for i, r := range w.Refs {
						want := all[tc.wantFirst+i]
						if r.URI != want.URI || r.Rows != want.Rows || r.Phase != want.Phase || !r.FirstCommit.Equal(want.FirstCommit) || r.Bytes != want.Bytes {
							t.Errorf("ref %d = %+v, want %+v", i, r, want)
						}
					}
				})
			}
		})
	}
}
