// Package batch holds what flows between the Postgres source and the sinks: positions in the
// source's WAL with the identity of that source, change rows decoded from pgoutput or read by the
// snapshot, the per-table buffer that keeps arrival order and cuts batches, last-write-wins
// collapse per key, the Arrow mapping of Postgres types with the fixed tail of context columns,
// and the Arrow IPC files that are staged between the reader and the committers.
package batch
