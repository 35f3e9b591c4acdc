// Package backfill reads a table's rows under an exported snapshot (package source) in
// keyset-paginated chunks straight into Arrow records, reading the next chunk while the caller
// writes the current one to the sink. Package activities holds one Session per snapshot for the
// backfill's Temporal session and applies the chunks.
package backfill
