package source

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/sluicecdc/sluice/batch"
)

// TestReadIdentity reads the catalog's identity of a pipeline's tables through the changes the
// reader must tell: the publication altered (flags off, then back: a new xmin), a table out of the
// publication and back (a new membership marker, Republish adds it), a table dropped and created
// again (a new OID), and one dropped (OID 0). ALTER PUBLICATION ... ADD TABLE, as setup runs it,
// leaves the publication's marker alone.
func TestReadIdentity(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, `CREATE TABLE a (id bigint PRIMARY KEY)`, `CREATE TABLE b (id bigint PRIMARY KEY)`)
	cfg := db.config(t, "a", "b")
	setup(t, cfg)
	ctx := context.Background()
	f, err := OpenFetcher(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	a, b := batch.TableName{Schema: "public", Name: "a"}, batch.TableName{Schema: "public", Name: "b"}
	read := func() Identity {
		t.Helper()
		id, err := f.Identity(ctx, cfg.Publication, []batch.TableName{a, b})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	oid := func(table string) uint32 {
		t.Helper()
		var o uint32
		if err := db.conn.QueryRow(ctx, `SELECT $1::regclass::oid`, table).Scan(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	first := read()
	if !first.Publication.Exists || first.Publication.Xmin == 0 || len(first.Publication.Unpublished) > 0 || !first.Publication.ViaRoot || first.At == 0 {
		t.Fatalf("publication as set up: %+v", first)
	}
	if m := first.Tables[a]; m.RelID != oid("a") || m.Member == "" {
		t.Fatalf("table a: %+v, want OID %d and a membership", m, oid("a"))
	}

	db.exec(t, `ALTER PUBLICATION `+cfg.Publication+` SET (publish = 'insert')`)
	off := read()
	if !slices.Equal(off.Publication.Unpublished, []string{"delete", "truncate", "update"}) || off.Publication.Xmin == first.Publication.Xmin {
		t.Fatalf("publish = insert: %+v, want delete, truncate, update unpublished and a new xmin", off.Publication)
	}
	db.exec(t, `ALTER PUBLICATION `+cfg.Publication+` SET (publish = 'insert, update, delete, truncate')`)
	back := read()
	if len(back.Publication.Unpublished) > 0 || back.Publication.Xmin == off.Publication.Xmin {
		t.Fatalf("flags back: %+v, want every action and a new xmin", back.Publication)
	}

	db.exec(t, `ALTER PUBLICATION `+cfg.Publication+` DROP TABLE b`)
	if m := read().Tables[b]; m.Member != "" || m.RelID != oid("b") {
		t.Fatalf("b out of the publication: %+v", m)
	}
	added, err := Republish(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil || !slices.Equal(added, []batch.TableName{b}) {
		t.Fatalf("Republish: %v, %v; want b added", added, err)
	}
	again := read()
	if m := again.Tables[b]; m.Member == "" || m.Member == first.Tables[b].Member {
		t.Fatalf("b added back: %+v, want a new membership (was %q)", m, first.Tables[b].Member)
	}
	if again.Publication.Xmin != back.Publication.Xmin {
		t.Errorf("ADD TABLE changed the publication's marker: xmin %d → %d", back.Publication.Xmin, again.Publication.Xmin)
	}

	was := oid("a")
	db.exec(t, `DROP TABLE a`)
	db.exec(t, `CREATE TABLE a (id bigint PRIMARY KEY)`)
	if m := read().Tables[a]; m.RelID == was || m.RelID != oid("a") || m.Member != "" {
		t.Fatalf("a re-created: %+v, want a new OID (was %d) outside the publication", m, was)
	}
	db.exec(t, `DROP TABLE a`)
	if m := read().Tables[a]; m != (TableMark{}) {
		t.Fatalf("a dropped: %+v, want no OID", m)
	}
	if added, err := Republish(ctx, cfg, slog.New(slog.DiscardHandler)); err != nil || len(added) != 0 {
		t.Fatalf("Republish with a dropped table: %v, %v; want nothing added, no error", added, err)
	}
}
