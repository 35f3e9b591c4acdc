package catalogwatch

import (
	"fmt"
	"strings"

	"github.com/sluicecdc/sluice/source"
)

// Diff is how a table's current partitions differ from its recorded set.
type Diff struct {
	// Gone were detached or dropped: their rows stay in the sink.
	Gone []source.Partition
	// Rewritten have new storage: truncated (pgoutput publishes a TRUNCATE only for the root)
	// or rewritten (VACUUM FULL, CLUSTER, ALTER TABLE that rewrites), which the catalog does not
	// tell apart.
	Rewritten []source.Partition
	// New were attached or created since.
	New []source.Partition
	// Reattached were detached and attached again (a new pg_inherits row): rows changed while
	// they were detached are not in the WAL.
	Reattached []source.Partition
}

// Compare returns how cur differs from recorded. Partitions are matched by OID: a renamed
// partition is the same partition. A partition with new storage is Rewritten even when it was
// also attached again; an attach marker of 0 (unknown) is never compared.
func Compare(recorded, cur []source.Partition) Diff {
	was := make(map[uint32]source.Partition, len(recorded))
	for _, p := range recorded {
		was[p.OID] = p
	}
	var d Diff
	for _, p := range cur {
		old, ok := was[p.OID]
		switch {
		case !ok:
			d.New = append(d.New, p)
		case old.RelFileNode != p.RelFileNode:
			d.Rewritten = append(d.Rewritten, p)
		case old.Attached != 0 && p.Attached != 0 && old.Attached != p.Attached:
			d.Reattached = append(d.Reattached, p)
		}
		delete(was, p.OID)
	}
	for _, p := range recorded {
		if _, gone := was[p.OID]; gone {
			d.Gone = append(d.Gone, p)
		}
	}
	return d
}

// Empty reports whether nothing changed.
func (d Diff) Empty() bool { return len(d.Gone)+len(d.Rewritten)+len(d.New)+len(d.Reattached) == 0 }

// reason says what changed that the WAL does not show: d's gone and rewritten partitions and,
// of its new ones, those in withRows.
func (d Diff) reason(withRows []source.Partition) string {
	var parts []string
	for _, p := range d.Gone {
		parts = append(parts, fmt.Sprintf("partition %s was detached or dropped (its rows leave the table without deletes in the WAL)", p.Table))
	}
	for _, p := range d.Rewritten {
		parts = append(parts, fmt.Sprintf("partition %s was truncated or rewritten (TRUNCATE of a partition is not published through the root; VACUUM FULL, CLUSTER and table rewrites look the same in the catalog)", p.Table))
	}
	for _, p := range d.Reattached {
		parts = append(parts, fmt.Sprintf("partition %s was detached and attached again (rows changed while it was detached are not in the WAL)", p.Table))
	}
	for _, p := range withRows {
		parts = append(parts, fmt.Sprintf("partition %s was attached holding rows (rows present at the attach are not in the WAL; rows inserted after it count too)", p.Table))
	}
	return strings.Join(parts, "; ")
}
