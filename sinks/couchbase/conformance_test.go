package couchbase

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/couchbase/gocb/v2"

	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
	"github.com/sluicecdc/sluice/testkit/testenv"
)

// TestConformance runs the suite every sink passes on gocaves; each test writes a collection of
// a scope of its own, read back document by document (a key-value store cannot be listed
// without the query service).
func TestConformance(t *testing.T) {
	cfg := testConfig(t)
	sinktest.Run(t, sinktest.Harness{
		Open:   func(t *testing.T) sinks.Sink { return openSink(t, cfg) },
		Target: func(t *testing.T) string { return testenv.RandomName("c") + ".orders" },
		Read: func(t *testing.T, s sinks.Sink, spec sinks.TableSpec, ids []int64) map[int64]sinktest.Row {
			sink := s.(*Sink)
			tgt, err := sink.parseTarget(spec)
			if err != nil {
				t.Fatal(err)
			}
			out := map[int64]sinktest.Row{}
			for _, id := range ids {
				res, err := sink.collection(tgt).Get(strconv.FormatInt(id, 10), &gocb.GetOptions{Context: t.Context()})
				if errors.Is(err, gocb.ErrDocumentNotFound) || errors.Is(err, gocb.ErrCollectionNotFound) {
					continue
				}
				if err != nil {
					t.Fatalf("Get %d: %v", id, err)
				}
				var doc struct {
					Name string  `json:"name"`
					Qty  float64 `json:"qty"`
				}
				if err := res.Content(&doc); err != nil {
					t.Fatalf("decoding %d: %v", id, err)
				}
				out[id] = sinktest.Row{Name: doc.Name, Qty: int32(doc.Qty)}
			}
			return out
		},
		Overtake: func(t *testing.T, s sinks.Sink, overtaken func(context.Context)) {
			var once sync.Once
			s.(*Sink).afterGuard = func(ctx context.Context) { once.Do(func() { overtaken(ctx) }) }
		},
	})
}
