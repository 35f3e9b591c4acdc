package batch

import (
	"errors"
	"fmt"
	"time"
)

// Limits bound the batches a Buffer cuts. All three must be positive.
type Limits struct {
	MaxRows  int           // rows per batch
	MaxBytes int           // text bytes of the values (Value.Text, new row and old key) per batch
	MaxWait  time.Duration // time from a batch's first row to its cut
}

// The default limits, of the config's batch section (batch.max_rows, max_bytes and max_wait) and
// of a reader given none (a SourceWorkflow started without them).
const (
	DefaultMaxRows  = 100_000
	DefaultMaxBytes = 64 << 20
	DefaultMaxWait  = time.Second
)

// WithDefaults returns l with every limit that is not positive set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxRows <= 0 {
		l.MaxRows = DefaultMaxRows
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultMaxWait
	}
	return l
}

// Validate reports every limit that is not positive.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxRows <= 0 {
		errs = append(errs, fmt.Errorf("batch max rows is %d, want > 0", l.MaxRows))
	}
	if l.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("batch max bytes is %d, want > 0", l.MaxBytes))
	}
	if l.MaxWait <= 0 {
		errs = append(errs, fmt.Errorf("batch max wait is %s, want > 0", l.MaxWait))
	}
	return errors.Join(errs...)
}

// CutReason says why a batch was cut.
type CutReason uint8

// The reasons for a cut.
const (
	CutRows  CutReason = iota + 1 // MaxRows reached
	CutBytes                      // MaxBytes reached, or the next change would pass it
	CutWait                       // MaxWait passed since the first row
	CutPhase                      // the next change belongs to the other phase
	CutFlush                      // Flush was called
)

// String names the reason: rows, bytes, wait, phase or flush.
func (r CutReason) String() string {
	switch r {
	case CutRows:
		return "rows"
	case CutBytes:
		return "bytes"
	case CutWait:
		return "wait"
	case CutPhase:
		return "phase"
	case CutFlush:
		return "flush"
	}
	return "unknown"
}

// Cut is one batch cut by a Buffer: changes of one table and one phase, in arrival order. Lo and
// Hi are the positions of its first and last change.
type Cut struct {
	Table   TableName
	Phase   Phase
	Lo, Hi  Position
	Changes []Change // owned by the Cut; Collapse may rewrite their values
	Bytes   int      // text bytes of the changes
	Reason  CutReason
}

// Buffer collects the changes of one table in arrival order and cuts them into batches of at
// most Limits.MaxRows rows and Limits.MaxBytes bytes, and at the latest Limits.MaxWait after a
// batch's first row. A batch may end inside a transaction: positions (commit LSN, sequence)
// keep the order across batches. A single change larger than MaxBytes becomes a batch of its
// own. The caller drives time by passing now; the Buffer starts no goroutine and reads no
// clock. It is not safe for concurrent use.
//
// The Buffer keeps the changes it is given, with their Values and OldKey slices and the Text
// they point to: the caller must not reuse them.
type Buffer struct {
	table   TableName
	limits  Limits
	changes []Change
	bytes   int
	phase   Phase
	first   time.Time // arrival of the first buffered change
	last    Position  // position of the last change added
	hasLast bool
}

// NewBuffer returns an empty buffer for table.
func NewBuffer(table TableName, limits Limits) (*Buffer, error) {
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("buffer of %s: %w", table, err)
	}
	return &Buffer{table: table, limits: limits}, nil
}

// changeBytes counts the text bytes of a change.
func changeBytes(c *Change) int {
	n := 0
	for i := range c.Values {
		n += len(c.Values[i].Text)
	}
	for i := range c.OldKey {
		n += len(c.OldKey[i].Text)
	}
	return n
}

// Add appends c, which arrived at now, and appends to dst the batches that this cuts (none, one
// or two), returning dst. Buffered changes are cut first when MaxWait has passed since the
// first of them, when c belongs to the other phase, or when c would take them past MaxBytes;
// then the batch holding c is cut when it reaches MaxRows or MaxBytes. A change whose position
// is before the previous one is an error: arrival order must be position order.
func (b *Buffer) Add(dst []Cut, c Change, now time.Time) ([]Cut, error) {
	if b.hasLast && c.Pos.Less(b.last) {
		return dst, fmt.Errorf("buffering %s: change at %s arrived after %s: changes must arrive in position order",
			b.table, c.Pos, b.last)
	}
	size := changeBytes(&c)
	phase := PhaseOf(c.Op)
	if len(b.changes) > 0 {
		switch {
		case phase != b.phase:
			dst = b.cut(dst, CutPhase)
		case now.Sub(b.first) >= b.limits.MaxWait:
			dst = b.cut(dst, CutWait)
		case b.bytes+size > b.limits.MaxBytes:
			dst = b.cut(dst, CutBytes)
		}
	}
	if len(b.changes) == 0 {
		b.first, b.phase = now, phase
		if b.changes == nil {
			b.changes = make([]Change, 0, min(b.limits.MaxRows, 1024))
		}
	}
	b.changes = append(b.changes, c)
	b.bytes += size
	b.last, b.hasLast = c.Pos, true
	switch {
	case len(b.changes) >= b.limits.MaxRows:
		dst = b.cut(dst, CutRows)
	case b.bytes >= b.limits.MaxBytes:
		dst = b.cut(dst, CutBytes)
	}
	return dst, nil
}

// Tick appends to dst the buffered batch when MaxWait has passed since its first row at now.
func (b *Buffer) Tick(dst []Cut, now time.Time) []Cut {
	if len(b.changes) > 0 && now.Sub(b.first) >= b.limits.MaxWait {
		dst = b.cut(dst, CutWait)
	}
	return dst
}

// Flush appends to dst whatever is buffered, as one batch.
func (b *Buffer) Flush(dst []Cut) []Cut {
	if len(b.changes) > 0 {
		dst = b.cut(dst, CutFlush)
	}
	return dst
}

// Deadline returns when the buffered batch is due (its first row's arrival plus MaxWait); ok is
// false when the buffer is empty. The caller sets its timer to it and calls Tick.
func (b *Buffer) Deadline() (deadline time.Time, ok bool) {
	if len(b.changes) == 0 {
		return time.Time{}, false
	}
	return b.first.Add(b.limits.MaxWait), true
}

// Len returns the number of buffered changes.
func (b *Buffer) Len() int { return len(b.changes) }

// Bytes returns the text bytes of the buffered changes.
func (b *Buffer) Bytes() int { return b.bytes }

// cut hands the buffered changes over as one batch.
func (b *Buffer) cut(dst []Cut, reason CutReason) []Cut {
	c := Cut{
		Table:   b.table,
		Phase:   b.phase,
		Lo:      b.changes[0].Pos,
		Hi:      b.changes[len(b.changes)-1].Pos,
		Changes: b.changes,
		Bytes:   b.bytes,
		Reason:  reason,
	}
	b.changes = make([]Change, 0, min(b.limits.MaxRows, max(len(c.Changes), 16)))
	b.bytes = 0
	return append(dst, c)
}
