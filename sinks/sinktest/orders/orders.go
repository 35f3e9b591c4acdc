// Package orders is shop.orders, the table the sinks' own tests write beside the conformance
// suite (package sinktest): its schema and spec, and builders of its changes and batches.
package orders

import (
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/sinktest"
)

// Schema is shop.orders(id int8 key, name text, qty int4, price numeric(12,2)).
func Schema() batch.Schema {
	return batch.Schema{
		Table: batch.TableName{Schema: "shop", Name: "orders"},
		Columns: []batch.Column{
			{Name: "id", TypeOID: 20, TypeName: "bigint", NotNull: true, Key: true},
			{Name: "name", TypeOID: 25, TypeName: "text"},
			{Name: "qty", TypeOID: 23, TypeName: "integer"},
			{Name: "price", TypeOID: 1700, TypeName: "numeric(12,2)", TypeMod: (12<<16 | 2) + 4},
		},
	}
}

// Spec is Schema written to target with __commit_ts materialized as committed_at, then the
// metadata columns more a sink's tests check.
func Spec(target string, more ...sinks.MetadataColumn) sinks.TableSpec {
	return sinks.TableSpec{
		Target:   target,
		Schema:   Schema(),
		Metadata: append([]sinks.MetadataColumn{{From: batch.MetaCommitTS, As: "committed_at"}}, more...),
	}
}

// Change is a change of row id with op; price is qty + 0.50. Positions are the caller's to set
// (Batch sets them).
func Change(op batch.Op, id int64, name string, qty int) batch.Change {
	return batch.Change{Op: op, Values: []batch.Value{
		sinktest.Text(strconv.FormatInt(id, 10)), sinktest.Text(name), sinktest.Text(strconv.Itoa(qty)), sinktest.Text(strconv.Itoa(qty) + ".50"),
	}}
}

// Insert is an insert of row id (see Change).
func Insert(id int64, name string, qty int) batch.Change {
	return Change(batch.OpInsert, id, name, qty)
}

// Update is an update of row id (see Insert).
func Update(id int64, name string, qty int) batch.Change {
	return Change(batch.OpUpdate, id, name, qty)
}

// Snapshot is row id as a snapshot reads it (see Insert).
func Snapshot(id int64, name string, qty int) batch.Change {
	return Change(batch.OpSnapshot, id, name, qty)
}

// Delete is a delete of row id (the key, other columns NULL).
func Delete(id int64) batch.Change {
	null := batch.Value{Null: true}
	return batch.Change{Op: batch.OpDelete, Values: []batch.Value{sinktest.Text(strconv.FormatInt(id, 10)), null, null, null}}
}

// CommitTS is the commit time Batch gives every change but a snapshot row.
func CommitTS() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }

// Batch is changes as one transaction of spec committed at lsn: positions lsn:0, lsn:1, ...
// (set in changes), CommitTS on every change but a snapshot row, Lo the first position and Hi
// the last, of sinktest.Source, whatever the phase.
func Batch(t testing.TB, spec sinks.TableSpec, phase batch.Phase, lsn uint64, changes ...batch.Change) sinks.Batch {
	t.Helper()
	for i := range changes {
		changes[i].Pos = batch.Position{LSN: lsn, Seq: uint32(i)}
		if changes[i].Op != batch.OpSnapshot {
			changes[i].CommitTS = CommitTS()
		}
	}
	rb, err := batch.NewRecordBuilder(memory.DefaultAllocator, spec.Schema)
	if err != nil {
		t.Fatalf("NewRecordBuilder: %v", err)
	}
	defer rb.Release()
	rec, err := rb.Build(changes, time.Now())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Cleanup(rec.Release)
	last := batch.Position{LSN: lsn, Seq: uint32(max(len(changes)-1, 0))}
	return sinks.Batch{
		Spec: spec, Phase: phase, Record: rec,
		Lo: batch.SourcePosition{Source: sinktest.Source, Position: batch.Position{LSN: lsn}},
		Hi: batch.SourcePosition{Source: sinktest.Source, Position: last},
	}
}
