// Package batch holds what flows between the Postgres source and the sinks: positions in the
// source's WAL with the identity of that source, change rows decoded from pgoutput or read by the
// snapshot, the per-table buffer that keeps arrival order and cuts batches, last-write-wins
// collapse per key, the Arrow mapping of Postgres types with the fixed tail of context columns,
// the Arrow IPC files that are staged between the reader and the committers, and the rules of
// the names they carry (table names in SQL syntax, plain names, slot names: names.go), which the
// config, the source and the sinks share.
//
// The path of one table's changes through this package:
//
//	Buffer.Add/Tick/Flush -> Cut -> Collapser.Collapse -> (source resolves Unchanged TOAST values)
//	  -> RecordBuilder.Build -> WriteFile  ...staged...  ReadFile -> RowPositions, sinks
//
// Values arrive in Postgres' text output format. The parsers read what Postgres prints with the
// session settings the source sets on both the replication and the snapshot connections:
// DateStyle=ISO, IntervalStyle=postgres (iso_8601 is read too), TimeZone=UTC (other offsets are
// applied), bytea_output=hex (escape is read too), client_encoding=UTF8. Text is not re-validated
// as UTF-8: Postgres guarantees it with client_encoding=UTF8.
//
// Every column maps (types without a native Arrow type are carried as the exact text Postgres
// prints; docs/types.md lists them). Errors are typed so the callers can stop instead of retrying
// or skipping: a ValueError (ErrNotRepresentable, ErrMalformedValue, ErrUnresolvedTOAST) for a
// value, naming the table, column and value.
package batch
