package batch

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// row returns an insert at (lsn, seq) with one value of n bytes.
func row(lsn uint64, seq uint32, n int) Change {
	return Change{Op: OpInsert, Pos: Position{LSN: lsn, Seq: seq}, Values: []Value{txt(strings.Repeat("x", n))}}
}

func TestBufferCuts(t *testing.T) {
	t.Parallel()
	limits := Limits{MaxRows: 3, MaxBytes: 100, MaxWait: time.Second}
	type step struct {
		add  *Change // nil: Tick
		at   time.Duration
		cuts []string // "reason:rows:lo-hi" of the batches cut by this step
	}
	ch := func(c Change) *Change { return &c }
	cases := []struct {
		name  string
		steps []step
		flush []string // cuts of the final Flush
	}{
		{"rows", []step{
			{add: ch(row(1, 0, 1))}, {add: ch(row(1, 1, 1))}, {add: ch(row(1, 2, 1)), cuts: []string{"rows:3:1/0-1/2"}},
			{add: ch(row(2, 0, 1))},
		}, []string{"flush:1:2/0-2/0"}},
		{"bytes reached exactly", []step{
			{add: ch(row(1, 0, 60))}, {add: ch(row(1, 1, 40)), cuts: []string{"bytes:2:1/0-1/1"}},
		}, nil},
		{"bytes would pass: cut before", []step{
			{add: ch(row(1, 0, 60))}, {add: ch(row(1, 1, 50)), cuts: []string{"bytes:1:1/0-1/0"}},
		}, []string{"flush:1:1/1-1/1"}},
		{"a change larger than max bytes is a batch of its own", []step{
			{add: ch(row(1, 0, 10))}, {add: ch(row(1, 1, 500)), cuts: []string{"bytes:1:1/0-1/0", "bytes:1:1/1-1/1"}},
			{add: ch(row(1, 2, 10))},
		}, []string{"flush:1:1/2-1/2"}},
		{"wait by tick", []step{
			{add: ch(row(1, 0, 1))}, {add: ch(row(1, 1, 1)), at: 500 * time.Millisecond},
			{at: 999 * time.Millisecond}, {at: time.Second, cuts: []string{"wait:2:1/0-1/1"}}, {at: 3 * time.Second},
		}, nil},
		{"wait on arrival after the deadline", []step{
			{add: ch(row(1, 0, 1))}, {add: ch(row(1, 1, 1)), at: 2 * time.Second, cuts: []string{"wait:1:1/0-1/0"}},
			{at: 2500 * time.Millisecond}, {at: 3 * time.Second, cuts: []string{"wait:1:1/1-1/1"}},
		}, nil},
		{"phase change", []step{
			{add: ch(Change{Op: OpSnapshot, Pos: Position{LSN: 5}, Values: []Value{txt("a")}})},
			{add: ch(Change{Op: OpSnapshot, Pos: Position{LSN: 5}, Values: []Value{txt("b")}})},
			{add: ch(row(6, 0, 1)), cuts: []string{"phase:2:5/0-5/0"}},
		}, []string{"flush:1:6/0-6/0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := NewBuffer(testTable, limits)
			if err != nil {
				t.Fatal(err)
			}
			var cuts []Cut
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				if st.add != nil {
					cuts, err = b.Add(cuts[:0], *st.add, now)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				} else {
					cuts = b.Tick(cuts[:0], now)
				}
				checkCuts(t, i, cuts, st.cuts, limits)
			}
			checkCuts(t, -1, b.Flush(nil), tc.flush, limits)
			if b.Len() != 0 || b.Bytes() != 0 {
				t.Errorf("after flush: %d rows, %d bytes buffered", b.Len(), b.Bytes())
			}
		})
	}
}

func checkCuts(t *testing.T, step int, got []Cut, want []string, limits Limits) {
	t.Helper()
	var desc []string
	for _, c := range got {
		desc = append(desc, fmt.Sprintf("%s:%d:%d/%d-%d/%d", c.Reason, len(c.Changes), c.Lo.LSN, c.Lo.Seq, c.Hi.LSN, c.Hi.Seq))
		if c.Table != testTable {
			t.Errorf("step %d: cut of table %s", step, c.Table)
		}
		if len(c.Changes) > limits.MaxRows || (c.Bytes > limits.MaxBytes && len(c.Changes) > 1) {
			t.Errorf("step %d: cut of %d rows and %d bytes passes the limits", step, len(c.Changes), c.Bytes)
		}
	}
	if strings.Join(desc, " ") != strings.Join(want, " ") {
		t.Errorf("step %d: cuts %v, want %v", step, desc, want)
	}
}

func TestBufferDeadline(t *testing.T) {
	t.Parallel()
	b, _ := NewBuffer(testTable, Limits{MaxRows: 10, MaxBytes: 100, MaxWait: time.Second})
	if _, ok := b.Deadline(); ok {
		t.Error("empty buffer has a deadline")
	}
	if _, err := b.Add(nil, row(1, 0, 1), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(nil, row(1, 1, 1), t0.Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if d, ok := b.Deadline(); !ok || !d.Equal(t0.Add(time.Second)) {
		t.Errorf("deadline %v, %v; want first row + max wait", d, ok)
	}
}

func TestBufferRejectsOutOfOrder(t *testing.T) {
	t.Parallel()
	b, _ := NewBuffer(testTable, Limits{MaxRows: 10, MaxBytes: 100, MaxWait: time.Second})
	if _, err := b.Add(nil, row(2, 1, 1), t0); err != nil {
		t.Fatal(err)
	}
	_, err := b.Add(nil, row(2, 0, 1), t0)
	if err == nil || !strings.Contains(err.Error(), "shop.orders") || !strings.Contains(err.Error(), "position order") {
		t.Errorf("got %v, want an out-of-order error naming the table", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	t.Parallel()
	err := Limits{}.Validate()
	for _, s := range []string{"max rows", "max bytes", "max wait"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Validate() = %v, want it to name %s", err, s)
		}
	}
	if _, err := NewBuffer(testTable, Limits{MaxRows: 1}); err == nil {
		t.Error("NewBuffer accepted zero limits")
	}
}

// TestBufferLargeTransaction feeds a 1,000,000-row transaction and checks that no batch passes
// the limits, that every row comes out once in order, and that batches end inside the
// transaction with positions that keep order.
func TestBufferLargeTransaction(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	limits := Limits{MaxRows: 10_000, MaxBytes: 256 << 10, MaxWait: time.Minute}
	b, _ := NewBuffer(testTable, limits)
	val := []Value{txt("0123456789012345678901234567890123456789")} // 40 bytes: bytes cut first
	var cuts []Cut
	var err error
	var next uint32
	var prevHi Position
	batches := 0
	check := func(cs []Cut) {
		for _, c := range cs {
			batches++
			if len(c.Changes) > limits.MaxRows || c.Bytes > limits.MaxBytes {
				t.Fatalf("batch of %d rows, %d bytes passes the limits", len(c.Changes), c.Bytes)
			}
			if batches > 1 && !prevHi.Less(c.Lo) {
				t.Fatalf("batch lo %s not after previous hi %s", c.Lo, prevHi)
			}
			for _, ch := range c.Changes {
				if ch.Pos.Seq != next {
					t.Fatalf("row %d came out as %d", next, ch.Pos.Seq)
				}
				next++
			}
			prevHi = c.Hi
		}
	}
	for i := range n {
		cuts, err = b.Add(cuts[:0], Change{Op: OpInsert, Pos: Position{LSN: 0x5000, Seq: uint32(i)}, Values: val}, t0)
		if err != nil {
			t.Fatal(err)
		}
		check(cuts)
	}
	check(b.Flush(cuts[:0]))
	if next != n {
		t.Fatalf("%d rows came out, want %d", next, n)
	}
	t.Logf("%d rows -> %d batches", n, batches)
}
