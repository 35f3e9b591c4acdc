package reader

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// TestSchemaRecordLayout pins the schema record as it persists in a staging directory: its
// object name and its JSON. A worker of the next release starts from the records this one
// wrote, so a change here is a change of the persisted format.
func TestSchemaRecordLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := staging.OpenDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	table := batch.TableName{Schema: "shop", Name: "items"}
	old := batch.Schema{Table: table, Columns: []batch.Column{{Name: "id", TypeOID: 23, TypeName: "integer", TypeMod: -1, NotNull: true, Key: true}}}
	cur := batch.Schema{Table: table, Columns: append(old.Columns, batch.Column{Name: "tags", TypeOID: 1009, TypeName: "text[]", TypeMod: -1, Category: "A", ElemOID: 25, Dims: 1, ElemCategory: "S"})}
	rec := schemaRecord{Schema: cur, Prev: &old, Since: batch.Position{LSN: 0x10, Seq: 2}, Attnums: map[string]int16{"id": 1, "tags": 3}}
	if err := putSchemaRecord(ctx, "p-1", store, rec); err != nil {
		t.Fatal(err)
	}
	const path = "p-1/_state/schema%20shop%2Eitems.json"
	const want = `{"schema":{"table":{"schema":"shop","name":"items"},"columns":[` +
		`{"name":"id","type_oid":23,"type_name":"integer","type_mod":-1,"not_null":true,"key":true},` +
		`{"name":"tags","type_oid":1009,"type_name":"text[]","type_mod":-1,"not_null":false,"key":false,"category":"A","elem_oid":25,"dims":1,"elem_category":"S"}]},` +
		`"prev":{"table":{"schema":"shop","name":"items"},"columns":[{"name":"id","type_oid":23,"type_name":"integer","type_mod":-1,"not_null":true,"key":true}]},` +
		`"since":{"lsn":16,"seq":2},"attnums":{"id":1,"tags":3}}`
	got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		t.Fatalf("the schema record is not at %s: %v", path, err)
	}
	if string(got) != want {
		t.Errorf("schema record =\n%s\nwant\n%s", got, want)
	}
	cfg := Config{Pipeline: "p-1", Schemas: []batch.Schema{old}}
	records, err := recordedSchemas(ctx, &cfg, store, &fakeFetcher{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Schemas[0].Columns) != 2 || records[table].Since != rec.Since || records[table].Attnums["tags"] != 3 {
		t.Errorf("read back: schemas %+v, records %+v; want the recorded %+v", cfg.Schemas, records, rec)
	}
}

// TestSchemaRecordsKeepAttnums: a table's schema record keeps its columns' attnums, so the next
// run's first RELATION tells a rename from a drop and an add (source.StreamOptions.Attnums): a
// new record takes them from the catalog (the fetcher), a handled schema change from its event;
// a record written before attnums were kept gives the stream none for its table.
func TestSchemaRecordsKeepAttnums(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := staging.OpenDir(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	orders, items := testSchema("orders"), testSchema("items")
	// items has a record of an earlier release: no attnums.
	if err := putSchemaRecord(ctx, "p", store, schemaRecord{Schema: items}); err != nil {
		t.Fatal(err)
	}
	read := func(events ...source.Event) source.StreamOptions {
		t.Helper()
		var opts source.StreamOptions
		fetcher := &fakeFetcher{attnums: func(_ context.Context, s batch.Schema) (map[string]int16, error) {
			if s.Table != orders.Table {
				t.Errorf("attnums of %s read from the catalog: it has a record", s.Table)
			}
			return map[string]int16{"id": 1, "note": 2}, nil
		}}
		stream := &fakeStream{run: func(ctx context.Context, h source.Handler) error {
			for _, ev := range events {
				if err := h(ctx, ev); err != nil {
					return err
				}
			}
			<-ctx.Done()
			return ctx.Err()
		}}
		_, err := Read(ctx, Config{Pipeline: "p", Source: testSource, Schemas: []batch.Schema{orders, items}, RunFor: 50 * time.Millisecond, ListEvery: time.Hour},
			Deps{Store: newFakeStore(), Tables: &fakeTables{resync: func(context.Context, batch.Schema) error { return nil }}, SchemaRecords: store,
				OpenFetcher: func(context.Context) (Fetcher, error) { return fetcher, nil },
				NewStream:   func(o source.StreamOptions) (Stream, error) { opts = o; return stream, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return opts
	}
	first := read(&source.SchemaEvent{Table: orders.Table, Pos: pos(11), Old: &orders, New: testSchema("orders", "body"),
		Added: []string{"body"}, Attnums: map[string]int16{"id": 1, "note": 2, "body": 4}})
	if want := map[string]int16{"id": 1, "note": 2}; !maps.Equal(first.Attnums[orders.Table], want) {
		t.Errorf("first run: the stream got attnums %v for %s, want the catalog's %v", first.Attnums[orders.Table], orders.Table, want)
	}
	if _, ok := first.Attnums[items.Table]; ok {
		t.Errorf("first run: the stream got attnums %v for %s, whose record has none", first.Attnums[items.Table], items.Table)
	}
	second := read()
	if want := map[string]int16{"id": 1, "note": 2, "body": 4}; !maps.Equal(second.Attnums[orders.Table], want) {
		t.Errorf("second run: the stream got attnums %v for %s, want the recorded change's %v", second.Attnums[orders.Table], orders.Table, want)
	}
}
