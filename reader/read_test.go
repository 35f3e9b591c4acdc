package reader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

func TestTickEveryCutsBatchesCloseToTheirMaxWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxWait, want time.Duration
	}{
		{time.Second, 100 * time.Millisecond},
		{5 * time.Second, 500 * time.Millisecond},
		{time.Minute, time.Second},                     // never less often than the old fixed second
		{50 * time.Millisecond, 10 * time.Millisecond}, // never busier than every 10 ms
	} {
		if got := tickEvery(tc.maxWait); got != tc.want {
			t.Errorf("tickEvery(%s) = %s, want %s", tc.maxWait, got, tc.want)
		}
	}
}

var testSource = batch.SourceID{SystemID: "7300000000000000001", Timeline: 1, Slot: "sluice_p"}

func testSchema(name string, extra ...string) batch.Schema {
	s := batch.Schema{Table: tableName(name), Columns: []batch.Column{
		{Name: "id", TypeOID: 20, TypeName: "bigint", Key: true, NotNull: true},
		{Name: "note", TypeOID: 25, TypeName: "text"},
	}}
	for _, c := range extra {
		s.Columns = append(s.Columns, batch.Column{Name: c, TypeOID: 25, TypeName: "text"})
	}
	return s
}

// idOnly is testSchema(name) without its note column.
func idOnly(name string) batch.Schema {
	s := testSchema(name)
	s.Columns = s.Columns[:1]
	return s
}

// change is an insert into table at lsn, with as many values as the table has columns.
func change(table string, lsn uint64, columns int) *source.ChangeEvent {
	vals := []batch.Value{{Text: []byte(fmt.Sprint(lsn))}}
	for range columns - 1 {
		vals = append(vals, batch.Value{Text: []byte("x")})
	}
	return &source.ChangeEvent{Table: tableName(table), Change: batch.Change{Op: batch.OpInsert, Pos: pos(lsn),
		CommitTS: time.Unix(1_700_000_000, 0), Values: vals}}
}

func insert(table string, lsn uint64) *source.ChangeEvent { return change(table, lsn, 2) }

// fakeStream is a Stream whose Run is the test's function.
type fakeStream struct {
	run       func(ctx context.Context, h source.Handler) error
	confirmed uint64
}

func (s *fakeStream) Run(ctx context.Context, h source.Handler) error { return s.run(ctx, h) }
func (s *fakeStream) Confirmed() uint64                               { return s.confirmed }

// fakeFetcher is a Fetcher whose methods are the test's functions (nil: fill nothing, no defaults).
type fakeFetcher struct {
	fill     func(ctx context.Context, schema batch.Schema, changes []batch.Change) ([]batch.Change, error)
	defaults func(ctx context.Context, table batch.TableName, cols []string) ([]string, error)
	attnums  func(ctx context.Context, s batch.Schema) (map[string]int16, error)
	closed   bool
}

// Attnums numbers the columns of s from 1 unless the test says otherwise.
func (f *fakeFetcher) Attnums(ctx context.Context, s batch.Schema) (map[string]int16, error) {
	if f.attnums != nil {
		return f.attnums(ctx, s)
	}
	out := map[string]int16{}
	for i, c := range s.Columns {
		out[c.Name] = int16(i + 1)
	}
	return out, nil
}

func (f *fakeFetcher) Fill(ctx context.Context, schema batch.Schema, changes []batch.Change) ([]batch.Change, error) {
	if f.fill == nil {
		return changes, nil
	}
	return f.fill(ctx, schema, changes)
}

func (f *fakeFetcher) ColumnsWithDefaults(ctx context.Context, table batch.TableName, cols []string) ([]string, error) {
	if f.defaults == nil {
		return nil, nil
	}
	return f.defaults(ctx, table, cols)
}

func (f *fakeFetcher) Close(context.Context) error { f.closed = true; return nil }

// fakeTables is a Tables whose methods are the test's functions.
type fakeTables struct {
	signal func(ctx context.Context, schema batch.Schema, refs []staging.BatchRef) error
	resync func(ctx context.Context, schema batch.Schema) error
}

func (f *fakeTables) SignalBatches(ctx context.Context, schema batch.Schema, refs []staging.BatchRef) error {
	return f.signal(ctx, schema, refs)
}

func (f *fakeTables) Resync(ctx context.Context, schema batch.Schema) error {
	return f.resync(ctx, schema)
}

// stepClock is a clock the test moves; every read adds a millisecond, so events are ordered.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// runStep is one step of a scripted stream.
type runStep struct {
	advance time.Duration // the clock moves this much first
	ev      source.Event  // delivered to the handler
	ackAll  bool          // every staged batch is committed and acknowledged
	list    bool          // the reader lists the store (as before its last status update)
	safe    *want         // then Safe must answer this
}

func safeIs(w want) *want { return &w }

func TestReadStagesBatchesAndConfirmsOnlyWhatNoTableHolds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		limits   batch.Limits
		defaults []string // the fetcher's answer to ColumnsWithDefaults
		onDrop   map[batch.TableName]string
		putErr   error
		signErr  error
		endErr   error     // the stream's own failure after the script
		steps    []runStep // then the stream runs until RunFor passes
		// wantLog is the run's calls to the store and the tables, in order.
		wantLog []string
		// tablesInAnyOrder compares the calls sorted: tables are flushed in no particular order.
		tablesInAnyOrder bool
		// wantSafe is Safe's answer when the stream has stopped (after its last listing).
		wantSafe want
		// wantBatches, wantRows and wantPos are the Result's.
		wantBatches, wantRows int64
		wantPos               uint64
		wantErr               string           // a substring of the error; "" for none
		wantMark              func(error) bool // the mark the error wraps
	}{
		{
			name:   "a batch cut at MaxRows is staged, then signalled; the slot stays at the first change not acknowledged",
			limits: batch.Limits{MaxRows: 2},
			steps: []runStep{
				{ev: insert("orders", 10), safe: safeIs(heldAt(10))},
				{ev: insert("orders", 11), safe: safeIs(heldAt(10))},
				{ev: insert("orders", 12), safe: safeIs(heldAt(10))},
				{list: true, safe: safeIs(heldAt(10))},
				{ackAll: true, safe: safeIs(heldAt(10))},
				{list: true, safe: safeIs(heldAt(12))},
				{ev: &source.CommitEvent{LSN: 12}},
			},
			wantLog:     []string{"put orders 10..11 2 rows", "signal orders 10..11"},
			wantSafe:    heldAt(12),
			wantBatches: 1, wantRows: 2, wantPos: 12,
		},
		{
			name:   "batches of a table staged within signalEvery share a signal, sent when due or at the run's end",
			limits: batch.Limits{MaxRows: 1},
			steps: []runStep{
				{ev: insert("orders", 10)}, // the table's first signal goes at once
				{ev: insert("orders", 11)},
				{ev: insert("orders", 12)},
				{ev: &source.ProgressEvent{}},                        // not due yet
				{advance: signalEvery, ev: &source.ProgressEvent{}},  // due: 11 and 12 together
				{ev: insert("orders", 13)},                           // waits for the next due time
				{advance: signalEvery, ev: insert("orders", 14)},     // due: 13 and 14 at once
				{ev: insert("orders", 15), safe: safeIs(heldAt(10))}, // sent at the run's clean end
			},
			wantLog: []string{
				"put orders 10..10 1 rows", "signal orders 10..10",
				"put orders 11..11 1 rows", "put orders 12..12 1 rows", "signal orders 11..11, 12..12",
				"put orders 13..13 1 rows", "put orders 14..14 1 rows", "signal orders 13..13, 14..14",
				"put orders 15..15 1 rows", "signal orders 15..15",
			},
			wantSafe:    heldAt(10),
			wantBatches: 6, wantRows: 6,
		},
		{
			name:   "a batch of one row is held from its cut until its table acknowledges it",
			limits: batch.Limits{MaxRows: 1},
			steps: []runStep{
				{ev: insert("orders", 10), safe: safeIs(heldAt(10))},
				{ackAll: true, list: true, safe: safeIs(nothingHeld)},
			},
			wantLog:     []string{"put orders 10..10 1 rows", "signal orders 10..10"},
			wantSafe:    nothingHeld,
			wantBatches: 1, wantRows: 1,
		},
		{
			name:   "MaxWait cuts at the first progress after it passed",
			limits: batch.Limits{MaxWait: time.Second},
			steps: []runStep{
				{ev: insert("orders", 10)},
				{advance: 500 * time.Millisecond, ev: &source.ProgressEvent{}, safe: safeIs(heldAt(10))},
				{advance: 600 * time.Millisecond, ev: &source.ProgressEvent{}, safe: safeIs(heldAt(10))},
				{ackAll: true, list: true, safe: safeIs(nothingHeld)},
			},
			wantLog:     []string{"put orders 10..10 1 rows", "signal orders 10..10"},
			wantSafe:    nothingHeld,
			wantBatches: 1, wantRows: 1,
		},
		{
			name:   "the first caught-up progress flushes every table, a later one does not",
			limits: batch.Limits{MaxWait: time.Hour},
			steps: []runStep{
				{ev: insert("orders", 10)},
				{ev: insert("items", 11)},
				{ev: &source.ProgressEvent{CaughtUp: true}, safe: safeIs(heldAt(10))},
				{ev: insert("orders", 12)},
				{ev: &source.ProgressEvent{CaughtUp: true}},
				{ackAll: true, list: true, safe: safeIs(heldAt(12))},
			},
			wantLog: []string{"put items 11..11 1 rows", "put orders 10..10 1 rows",
				"signal items 11..11", "signal orders 10..10"},
			tablesInAnyOrder: true,
			wantSafe:         heldAt(12),
			wantBatches:      2, wantRows: 2,
		},
		{
			name: "an idle table holds nothing and changes of a table the pipeline does not read are ignored",
			steps: []runStep{
				{ev: insert("other", 10), safe: safeIs(nothingHeld)},
				{ev: &source.TruncateEvent{Table: tableName("other"), Pos: pos(11)}, safe: safeIs(nothingHeld)},
			},
			wantSafe: nothingHeld,
		},
		{
			name: "a TRUNCATE stages what was buffered before it, then resyncs the table",
			steps: []runStep{
				{ev: insert("orders", 10)},
				{ev: &source.TruncateEvent{Table: tableName("orders"), Pos: pos(11)}, safe: safeIs(heldAt(10))},
			},
			wantLog:     []string{"put orders 10..10 1 rows", "signal orders 10..10", "resync orders (2 columns)"},
			wantSafe:    heldAt(10),
			wantBatches: 1, wantRows: 1,
		},
		{
			name:     "columns added with a default stage the old schema's changes, then resync the table under the new one",
			defaults: []string{"tag"},
			steps: []runStep{
				{ev: insert("orders", 10)},
				{ev: &source.SchemaEvent{Table: tableName("orders"), Pos: pos(11), Old: ptr(testSchema("orders")),
					New: testSchema("orders", "tag"), Added: []string{"tag"}}},
				{ev: change("orders", 12, 3)},
				{ev: &source.ProgressEvent{CaughtUp: true}},
			},
			wantLog: []string{"put orders 10..10 1 rows", "signal orders 10..10", "resync orders (3 columns)",
				"put orders 12..12 1 rows", "signal orders 12..12"},
			wantSafe:    heldAt(10),
			wantBatches: 2, wantRows: 2,
		},
		{
			name: "columns added without a default follow the stream without a resync",
			steps: []runStep{
				{ev: &source.SchemaEvent{Table: tableName("orders"), Pos: pos(11), Old: ptr(testSchema("orders")),
					New: testSchema("orders", "tag"), Added: []string{"tag"}}},
				{ev: change("orders", 12, 3)},
				{ev: &source.ProgressEvent{CaughtUp: true}},
			},
			wantLog:     []string{"put orders 12..12 1 rows", "signal orders 12..12"},
			wantSafe:    heldAt(12),
			wantBatches: 1, wantRows: 1,
		},
		{
			name: "a dropped column stages the old schema's changes, then resyncs the table (the sink's column NULL in every row)",
			steps: []runStep{
				{ev: insert("orders", 10)},
				{ev: &source.SchemaEvent{Table: tableName("orders"), Pos: pos(11), Old: ptr(testSchema("orders")),
					New: idOnly("orders"), Dropped: []string{"note"}}},
				{ev: change("orders", 12, 1)},
				{ev: &source.ProgressEvent{CaughtUp: true}},
			},
			wantLog: []string{"put orders 10..10 1 rows", "signal orders 10..10", "resync orders (1 columns)",
				"put orders 12..12 1 rows", "signal orders 12..12"},
			wantSafe:    heldAt(10),
			wantBatches: 2, wantRows: 2,
		},
		{
			name:     "a dropped column and one added with a default ask one resync",
			defaults: []string{"flag"},
			steps: []runStep{
				{ev: &source.SchemaEvent{Table: tableName("orders"), Pos: pos(11), Old: ptr(testSchema("orders")),
					New:     batch.Schema{Table: tableName("orders"), Columns: append(idOnly("orders").Columns, batch.Column{Name: "flag", TypeOID: 23, TypeName: "integer"})},
					Dropped: []string{"note"}, Added: []string{"flag"}}},
			},
			wantLog:  []string{"resync orders (2 columns)"},
			wantSafe: nothingHeld,
		},
		{
			name:   "a dropped column of a table with on_drop_column keep follows the stream without a resync",
			onDrop: map[batch.TableName]string{tableName("orders"): "keep"},
			steps: []runStep{
				{ev: &source.SchemaEvent{Table: tableName("orders"), Pos: pos(11), Old: ptr(testSchema("orders")),
					New: idOnly("orders"), Dropped: []string{"note"}}},
				{ev: change("orders", 12, 1)},
				{ev: &source.ProgressEvent{CaughtUp: true}},
			},
			wantLog:     []string{"put orders 12..12 1 rows", "signal orders 12..12"},
			wantSafe:    heldAt(12),
			wantBatches: 1, wantRows: 1,
		},
		{
			name: "a renamed table stops the reader",
			steps: []runStep{
				{ev: insert("orders", 10)},
				{ev: &source.SchemaEvent{Table: tableName("orders_v2"), Pos: pos(11), Old: ptr(testSchema("orders")),
					New: testSchema("orders_v2"), Renamed: true}},
			},
			wantSafe: heldAt(10),
			wantErr:  "streaming pipeline p: pipeline p: public.orders now streams as public.orders_v2",
			wantMark: isType(failure.SourceSetup),
		},
		{
			name:   "a failed Put stops the reader and the cut stays held",
			limits: batch.Limits{MaxRows: 1},
			putErr: errors.New("bucket gone"),
			steps:  []runStep{{ev: insert("orders", 10)}},
			// The stream's last status update comes from the stream; nothing was staged.
			wantLog:  []string{"put orders 10..10 1 rows"},
			wantSafe: heldAt(10),
			wantErr:  "streaming pipeline p: staging batch 0/A:0..0/A:0 of table public.orders: bucket gone",
		},
		{
			name:    "a failed signal stops the reader and the staged batch stays held",
			limits:  batch.Limits{MaxRows: 1},
			signErr: errors.New("temporal unavailable"),
			steps:   []runStep{{ev: insert("orders", 10)}},
			wantLog: []string{"put orders 10..10 1 rows", "signal orders 10..10"},
			// The batch is in the store and in no table's workflow: the next run's listing holds it.
			wantSafe: heldAt(10),
			wantErr:  "signalling table public.orders of batch 0/A:0..0/A:0: temporal unavailable",
		},
		{
			name:     "a failure of the stream says the stream failed",
			endErr:   errors.New("connection reset"),
			steps:    []runStep{{ev: &source.CommitEvent{LSN: 30}}},
			wantSafe: nothingHeld,
			wantPos:  30,
			wantErr:  "streaming pipeline p: connection reset",
		},
		{
			name:     "RunFor passing ends the run cleanly with the buffer unconfirmed",
			steps:    []runStep{{ev: insert("orders", 10)}, {ev: &source.CommitEvent{LSN: 10}}},
			wantSafe: heldAt(10),
			wantPos:  10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := &stepClock{t: time.Unix(1_700_000_000, 0)}
			store := newFakeStore()
			var (
				mu   sync.Mutex
				log  []string
				opts source.StreamOptions
			)
			record := func(s string) {
				mu.Lock()
				defer mu.Unlock()
				log = append(log, s)
			}
			// No gap: while a batch is put, Safe holds the slot at or below its first change.
			store.put = func(_ context.Context, ref staging.BatchRef) (staging.BatchRef, error) {
				record(fmt.Sprintf("put %s %d..%d %d rows", ref.Table.Name, ref.Lo.Position.LSN, ref.Hi.Position.LSN, ref.Rows))
				if low, found := opts.Safe(); !found || ref.Lo.Position.Less(low) {
					t.Errorf("while batch %s is put, Safe answers %v (found %v): the slot could move past it", ref.Range(), low, found)
				}
				if ref.Lo.Source != testSource || ref.Pipeline != "p" || ref.Phase != "stream" || ref.FirstCommit.IsZero() {
					t.Errorf("batch %s is staged as %+v", ref.Range(), ref)
				}
				if tt.putErr != nil {
					return staging.BatchRef{}, tt.putErr
				}
				return store.add(ref), nil
			}
			tables := &fakeTables{
				signal: func(_ context.Context, schema batch.Schema, refs []staging.BatchRef) error {
					ranges := make([]string, len(refs))
					for i, ref := range refs {
						ranges[i] = fmt.Sprintf("%d..%d", ref.Lo.Position.LSN, ref.Hi.Position.LSN)
						if ref.URI == "" {
							t.Errorf("batch %s signalled before it was staged", ref.Range())
						}
					}
					record(fmt.Sprintf("signal %s %s", schema.Table.Name, strings.Join(ranges, ", ")))
					return tt.signErr
				},
				resync: func(_ context.Context, schema batch.Schema) error {
					record(fmt.Sprintf("resync %s (%d columns)", schema.Table.Name, len(schema.Columns)))
					return nil
				},
			}
			fetcher := &fakeFetcher{defaults: func(context.Context, batch.TableName, []string) ([]string, error) {
				return tt.defaults, nil
			}}
			stream := &fakeStream{confirmed: 7, run: func(ctx context.Context, h source.Handler) error {
				defer opts.BeforeLastStatus(ctx)
				for i, s := range tt.steps {
					clock.advance(s.advance)
					if s.ev != nil {
						if err := h(ctx, s.ev); err != nil {
							return err
						}
					}
					if s.ackAll {
						for _, r := range store.contents() {
							store.ack(r.URI)
						}
					}
					if s.list {
						opts.BeforeLastStatus(ctx)
					}
					if s.safe != nil {
						low, found := opts.Safe()
						if got := (want{lsn: low.LSN, none: !found}); got != *s.safe {
							t.Errorf("after step %d: %s, want %s", i, got, *s.safe)
						}
					}
				}
				if tt.endErr != nil {
					return tt.endErr
				}
				<-ctx.Done() // as a stream does: it runs until RunFor passes
				return ctx.Err()
			}}
			cfg := Config{Pipeline: "p", Source: testSource, Schemas: []batch.Schema{testSchema("orders"), testSchema("items")},
				Limits: tt.limits, RunFor: 50 * time.Millisecond, ListEvery: time.Hour, OnDropColumn: tt.onDrop}
			if cfg.Limits.MaxWait == 0 {
				cfg.Limits.MaxWait = time.Hour
			}
			var heartbeats int
			res, err := Read(ctx, cfg, Deps{
				Store:       store,
				Tables:      tables,
				OpenFetcher: func(context.Context) (Fetcher, error) { return fetcher, nil },
				NewStream: func(o source.StreamOptions) (Stream, error) {
					opts = o
					return stream, nil
				},
				Heartbeat: func(context.Context, Result) { heartbeats++ },
				Now:       clock.now,
			})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Read: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Read returned %v, want an error with %q", err, tt.wantErr)
			}
			if tt.wantMark != nil && !tt.wantMark(err) {
				t.Errorf("Read's error %v does not wrap the mark it should", err)
			}
			if tt.tablesInAnyOrder {
				slices.Sort(log)
			}
			if !slices.Equal(log, tt.wantLog) {
				t.Errorf("calls:\n  %s\nwant:\n  %s", strings.Join(log, "\n  "), strings.Join(tt.wantLog, "\n  "))
			}
			low, found := opts.Safe()
			if got := (want{lsn: low.LSN, none: !found}); got != tt.wantSafe {
				t.Errorf("when the stream stopped: %s, want %s", got, tt.wantSafe)
			}
			if res.Batches != tt.wantBatches || res.Rows != tt.wantRows || res.Position.Position.LSN != tt.wantPos ||
				res.Position.Source != testSource || res.Confirmed != (batch.SourcePosition{Source: testSource, Position: pos(7)}) {
				t.Errorf("result %+v, want %d batches, %d rows, position %d, confirmed 7", res, tt.wantBatches, tt.wantRows, tt.wantPos)
			}
			if opts.ProgressInterval != tickEvery(cfg.Limits.MaxWait) || len(opts.Schemas) != 2 {
				t.Errorf("stream options %+v", opts)
			}
			if !fetcher.closed {
				t.Error("the fetcher was not closed")
			}
			progress := 0
			for _, s := range tt.steps {
				if _, ok := s.ev.(*source.ProgressEvent); ok {
					progress++
				}
			}
			if heartbeats != progress {
				t.Errorf("%d heartbeats for %d progress events", heartbeats, progress)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// isType returns a check that an error holds the permanent mark of type typ.
func isType(typ string) func(error) bool {
	return func(err error) bool { return failure.TypeOf(err) == typ }
}

// TestReadFailsBeforeStreaming covers the failures before the stream starts: each is marked
// for the activity to classify, and nothing is staged.
func TestReadFailsBeforeStreaming(t *testing.T) {
	t.Parallel()
	bad := testSchema("orders")
	bad.Columns[0].Key = false // no key: the collapser refuses it
	tests := []struct {
		name     string
		schemas  []batch.Schema
		openErr  error
		listErr  error
		streamEr error
		wantErr  string
		wantMark func(error) bool
	}{
		{name: "a table without a key", schemas: []batch.Schema{bad}, wantErr: "key", wantMark: isType(failure.SourceSetup)},
		{name: "the fetcher cannot connect", openErr: errors.New("refused"),
			wantErr: "connecting to the source of pipeline p: refused"},
		{name: "the staging store cannot be listed", listErr: errors.New("bucket gone"),
			wantErr: "listing staged batches of pipeline p: bucket gone"},
		{name: "the stream cannot start", streamEr: errors.New("bad config"),
			wantErr: "starting the stream of pipeline p: bad config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			schemas := tt.schemas
			if schemas == nil {
				schemas = []batch.Schema{testSchema("orders")}
			}
			store := newFakeStore()
			store.list = func(context.Context, string) ([]staging.BatchRef, error) { return nil, tt.listErr }
			fetcher := &fakeFetcher{}
			_, err := Read(context.Background(), Config{Pipeline: "p", Source: testSource, Schemas: schemas}, Deps{
				Store: store,
				OpenFetcher: func(context.Context) (Fetcher, error) {
					if tt.openErr != nil {
						return nil, tt.openErr
					}
					return fetcher, nil
				},
				NewStream: func(source.StreamOptions) (Stream, error) {
					if tt.streamEr != nil {
						return nil, tt.streamEr
					}
					t.Fatal("the stream started")
					return nil, nil
				},
			})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Read returned %v, want an error with %q", err, tt.wantErr)
			}
			if tt.wantMark != nil && !tt.wantMark(err) {
				t.Errorf("Read's error %v does not wrap the mark it should", err)
			}
		})
	}
}
