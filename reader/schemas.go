package reader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
	"github.com/sluicecdc/sluice/source"
	"github.com/sluicecdc/sluice/staging"
)

// schemaRecord is the schema the reader last followed for a table: Schema from Since on, Prev
// before it (nil when first recorded). A run starts from it instead of the catalog, so a change
// made while no reader ran (ADD COLUMN ... DEFAULT, RENAME COLUMN, a replica identity) shows at
// the table's next RELATION as a difference and is handled as when it happens while streaming.
type schemaRecord struct {
	Schema batch.Schema   `json:"schema"`
	Prev   *batch.Schema  `json:"prev,omitempty"`
	Since  batch.Position `json:"since"`
	// Attnums are the catalog's attnums of Schema's columns when it was recorded (absent in
	// records written before they were kept): the next run's first RELATION tells a rename from
	// a drop and an add by them (source.StreamOptions.Attnums).
	Attnums map[string]int16 `json:"attnums,omitempty"`
}

// schemaRecordName is the state document name of table's schema record.
func schemaRecordName(table batch.TableName) string { return "schema " + table.String() }

// recordedSchemas replaces each schema of cfg.Schemas (read from the catalog at the run's
// start) with the one recorded for its table, and records the catalog's, with its columns'
// attnums (from f), for a table without a record. It returns the records.
func recordedSchemas(ctx context.Context, cfg *Config, store staging.State, f Fetcher) (map[batch.TableName]schemaRecord, error) {
	out := map[batch.TableName]schemaRecord{}
	cfg.Schemas = slices.Clone(cfg.Schemas)
	for i, s := range cfg.Schemas {
		data, err := store.GetState(ctx, cfg.Pipeline, schemaRecordName(s.Table))
		if errors.Is(err, staging.ErrNotFound) {
			nums, err := f.Attnums(ctx, s)
			if err != nil {
				return nil, err
			}
			rec := schemaRecord{Schema: s, Attnums: nums}
			if err := putSchemaRecord(ctx, cfg.Pipeline, store, rec); err != nil {
				return nil, err
			}
			out[s.Table] = rec
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("table %s: reading the schema the reader last followed: %w", s.Table, err)
		}
		var rec schemaRecord
		if err := json.Unmarshal(data, &rec); err != nil || rec.Schema.Table != s.Table {
			return nil, failure.New(failure.SourceSetup, fmt.Sprintf("table %s: the schema record in staging (state %q) cannot be read "+
				"(%v); delete it to start from the catalog's schema (a change made while the pipeline was stopped is then "+
				"not seen)", s.Table, schemaRecordName(s.Table), err), err)
		}
		cfg.Schemas[i] = rec.Schema
		out[s.Table] = rec
	}
	return out, nil
}

func putSchemaRecord(ctx context.Context, pipeline string, store staging.State, rec schemaRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("table %s: encoding the schema record: %w", rec.Schema.Table, err)
	}
	if err := store.PutState(ctx, pipeline, schemaRecordName(rec.Schema.Table), data); err != nil {
		return fmt.Errorf("table %s: recording the schema the reader follows: %w", rec.Schema.Table, err)
	}
	return nil
}

// recordSchema records e.New as the schema table e.Table follows from e.Pos on, once e was
// handled (a stop or a resync asked for): a run that replays e from an earlier slot position
// meets it again (replayed).
func (r *run) recordSchema(ctx context.Context, e *source.SchemaEvent) error {
	if r.deps.SchemaRecords == nil {
		return nil
	}
	rec := schemaRecord{Schema: e.New, Prev: e.Old, Since: e.Pos, Attnums: e.Attnums}
	if err := putSchemaRecord(ctx, r.cfg.Pipeline, r.deps.SchemaRecords, rec); err != nil {
		return err
	}
	r.records[e.Table] = rec
	return nil
}

// recordedAttnums are the attnums of every record that has them, for the stream.
func (r *run) recordedAttnums() map[batch.TableName]map[string]int16 {
	out := map[batch.TableName]map[string]int16{}
	for t, rec := range r.records {
		if rec.Attnums != nil {
			out[t] = rec.Attnums
		}
	}
	return out
}

// replayed reports whether e is a RELATION from before the recorded change, which a run
// replays when the slot restarts behind it: the columns the record had before it, at an earlier
// position. The change itself comes again after it and is handled again.
func (r *run) replayed(e *source.SchemaEvent) bool {
	rec, ok := r.records[e.Table]
	if !ok || rec.Prev == nil || !e.Pos.Less(rec.Since) || len(e.New.Columns) != len(rec.Prev.Columns) {
		return false
	}
	for i, c := range e.New.Columns {
		p := rec.Prev.Columns[i]
		if c.Name != p.Name || c.TypeOID != p.TypeOID || c.TypeMod != p.TypeMod {
			return false
		}
	}
	return true
}
