package reader

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicecdc/sluice/batch"
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
	rec := schemaRecord{Schema: cur, Prev: &old, Since: batch.Position{LSN: 0x10, Seq: 2}}
	if err := putSchemaRecord(ctx, "p-1", store, rec); err != nil {
		t.Fatal(err)
	}
	const path = "p-1/_state/schema%20shop%2Eitems.json"
	const want = `{"schema":{"table":{"schema":"shop","name":"items"},"columns":[` +
		`{"name":"id","type_oid":23,"type_name":"integer","type_mod":-1,"not_null":true,"key":true},` +
		`{"name":"tags","type_oid":1009,"type_name":"text[]","type_mod":-1,"not_null":false,"key":false,"category":"A","elem_oid":25,"dims":1,"elem_category":"S"}]},` +
		`"prev":{"table":{"schema":"shop","name":"items"},"columns":[{"name":"id","type_oid":23,"type_name":"integer","type_mod":-1,"not_null":true,"key":true}]},` +
		`"since":{"lsn":16,"seq":2}}`
	got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		t.Fatalf("the schema record is not at %s: %v", path, err)
	}
	if string(got) != want {
		t.Errorf("schema record =\n%s\nwant\n%s", got, want)
	}
	cfg := Config{Pipeline: "p-1", Schemas: []batch.Schema{old}}
	records, err := recordedSchemas(ctx, &cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Schemas[0].Columns) != 2 || records[table].Since != rec.Since {
		t.Errorf("read back: schemas %+v, records %+v; want the recorded %+v", cfg.Schemas, records, rec)
	}
}
