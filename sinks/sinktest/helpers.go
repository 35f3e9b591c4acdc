package sinktest

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
)

// Text is a non-NULL value in Postgres's text format.
func Text(s string) batch.Value { return batch.Value{Text: []byte(s)} }

// Logger is the logger of a sink under test: to t.Log at Info under go test -v, discarding
// otherwise.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Position is s's committed position of spec's target, failing the test on error.
func Position(t testing.TB, s sinks.Sink, spec sinks.TableSpec) (batch.SourcePosition, bool) {
	t.Helper()
	p, ok, err := s.Position(t.Context(), spec)
	if err != nil {
		t.Fatalf("Position: %v", err)
	}
	return p, ok
}

// DiffRows lists, in key order, the keys whose visible rows got differ from want: missing,
// different, or visible although want has none. It is empty when they match.
func DiffRows[V comparable](want, got map[int64]V) string {
	keys := make([]int64, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		w, inW := want[k]
		g, inG := got[k]
		switch {
		case inW && !inG:
			fmt.Fprintf(&b, "key %d missing (want %+v)\n", k, w)
		case !inW && inG:
			fmt.Fprintf(&b, "key %d = %+v should not be visible\n", k, g)
		case w != g:
			fmt.Fprintf(&b, "key %d = %+v, want %+v\n", k, g, w)
		}
	}
	return b.String()
}
