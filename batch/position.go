package batch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrDifferentSource is returned when two positions of different sources are compared. Positions
// of different Postgres clusters, timelines or slots have no defined order.
var ErrDifferentSource = errors.New("positions belong to different sources")

// SourceID names the stream a position belongs to: the Postgres system identifier (from
// IDENTIFY_SYSTEM), its timeline and the replication slot.
type SourceID struct {
	SystemID string `json:"system_id"`
	Timeline int32  `json:"timeline"`
	Slot     string `json:"slot"`
}

// String formats the source as system_id/timeline/slot.
func (s SourceID) String() string {
	return fmt.Sprintf("%s/%d/%s", s.SystemID, s.Timeline, s.Slot)
}

// Position is a point in one table's change stream: the commit LSN of the transaction and the
// sequence of the change within it. Rows of one transaction share the LSN; Seq keeps their
// arrival order. Snapshot rows carry the snapshot's consistent LSN and Seq 0.
type Position struct {
	LSN uint64 `json:"lsn"`
	Seq uint32 `json:"seq"`
}

// Less reports whether p comes before q in the stream.
func (p Position) Less(q Position) bool {
	if p.LSN != q.LSN {
		return p.LSN < q.LSN
	}
	return p.Seq < q.Seq
}

// IsZero reports whether p is the zero position (nothing committed).
func (p Position) IsZero() bool { return p.LSN == 0 && p.Seq == 0 }

// String formats the position as Postgres prints an LSN, then the sequence: 0/16B3748:12.
func (p Position) String() string {
	b, _ := p.AppendText(make([]byte, 0, 24))
	return string(b)
}

// AppendText appends the String form of p to b (encoding.TextAppender); it never fails.
func (p Position) AppendText(b []byte) ([]byte, error) {
	b = AppendLSN(b, p.LSN)
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(p.Seq), 10), nil
}

// AppendLSN appends an LSN as Postgres prints it (0/16B3748) to b.
func AppendLSN(b []byte, lsn uint64) []byte {
	start := len(b)
	b = strconv.AppendUint(b, lsn>>32, 16)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(uint32(lsn)), 16)
	// Postgres prints upper-case hex digits.
	for i := start; i < len(b); i++ {
		if b[i] >= 'a' && b[i] <= 'f' {
			b[i] -= 'a' - 'A'
		}
	}
	return b
}

// ParsePosition parses the String form of a position.
func ParsePosition(s string) (Position, error) {
	lsnPart, seqPart, ok := strings.Cut(s, ":")
	if !ok {
		return Position{}, fmt.Errorf("parsing position %q: want LSN:sequence such as 0/16B3748:12", s)
	}
	hi, lo, ok := strings.Cut(lsnPart, "/")
	if !ok {
		return Position{}, fmt.Errorf("parsing position %q: LSN wants the form 0/16B3748", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return Position{}, fmt.Errorf("parsing position %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return Position{}, fmt.Errorf("parsing position %q: %w", s, err)
	}
	seq, err := strconv.ParseUint(seqPart, 10, 32)
	if err != nil {
		return Position{}, fmt.Errorf("parsing position %q: %w", s, err)
	}
	return Position{LSN: h<<32 | l, Seq: uint32(seq)}, nil
}

// SourcePosition is a position together with the source it belongs to. Every stored position
// (in a sink, in a workflow) is a SourcePosition.
type SourcePosition struct {
	Source   SourceID `json:"source"`
	Position Position `json:"position"`
}

// Compare orders two source positions: -1, 0 or +1. It returns ErrDifferentSource when they
// belong to different sources, since their order is undefined.
func (a SourcePosition) Compare(b SourcePosition) (int, error) {
	if a.Source != b.Source {
		return 0, fmt.Errorf("comparing %s with %s: %w", a, b, ErrDifferentSource)
	}
	switch {
	case a.Position.Less(b.Position):
		return -1, nil
	case b.Position.Less(a.Position):
		return 1, nil
	}
	return 0, nil
}

// String formats the source position as source@position.
func (a SourcePosition) String() string {
	return a.Source.String() + "@" + a.Position.String()
}

// ParseSourcePosition parses the String form of a source position,
// system_id/timeline/slot@0/16B3748:12.
func ParseSourcePosition(s string) (SourcePosition, error) {
	src, pos, ok := strings.Cut(s, "@")
	if !ok {
		return SourcePosition{}, fmt.Errorf("parsing source position %q: want system_id/timeline/slot@LSN:sequence", s)
	}
	parts := strings.SplitN(src, "/", 3)
	if len(parts) != 3 {
		return SourcePosition{}, fmt.Errorf("parsing source position %q: source wants system_id/timeline/slot", s)
	}
	tl, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil {
		return SourcePosition{}, fmt.Errorf("parsing timeline of source position %q: %w", s, err)
	}
	p, err := ParsePosition(pos)
	if err != nil {
		return SourcePosition{}, fmt.Errorf("parsing source position %q: %w", s, err)
	}
	return SourcePosition{Source: SourceID{SystemID: parts[0], Timeline: int32(tl), Slot: parts[2]}, Position: p}, nil
}
