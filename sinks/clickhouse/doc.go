// Package clickhouse is the ClickHouse sink: the last step of the data path for tables replicated
// into ClickHouse, over the native protocol (clickhouse-go v2).
//
// # Tables
//
// Each target is a ReplacingMergeTree ordered by the source's key (then _sluice_marker, see
// below), with the table's columns, the materialized metadata columns, and four columns of its
// own: _version UInt64, _is_deleted UInt8, _sluice_marker UInt8 and _sluice_position String.
// The server's version (SELECT version()) decides the layout of new tables (Config.Schema can
// force one; asking for modern on an older server is refused when the sink starts):
//
//   - modern (23.2 and later): ReplacingMergeTree(_version, _is_deleted). SELECT ... FINAL
//     returns the current image of every live key; tombstones are hidden by FINAL itself.
//   - compatible (older servers, such as Debian's 18.16): ReplacingMergeTree(_version) with
//     _is_deleted as a plain column, and a view <table>_current defined as
//     SELECT * FROM <table> FINAL WHERE _is_deleted = 0. Query the view, or write that filter
//     after FINAL yourself; never put _is_deleted in PREWHERE, which runs before FINAL and lets
//     older images of deleted keys through.
//
// Existing tables keep the layout they were created with, also after a server upgrade.
//
// # Versions, upserts and deletes
//
// _version is the commit LSN of the change (the snapshot's consistent LSN for backfilled rows).
// ReplacingMergeTree keeps the image with the highest version per key; equal versions (changes
// of one transaction split over several batches) resolve to the last inserted, which is the last
// committed since commits run in position order. A snapshot row therefore never overrides a
// later change of its key, and a replayed insert never overrides a later delete.
//
// A delete is a tombstone row: the key columns hold the key, _version the delete's LSN,
// _is_deleted 1, the metadata columns describe the delete (op delete, its position and commit
// time), and every other column is NULL (an empty array for array columns). An update that
// changes the key arrives collapsed as a tombstone of the old key and an upsert of the new one.
//
// # The committed position, atomically with the data
//
// Apply writes a batch as one INSERT of one block: the batch's rows plus one marker row with
// _sluice_marker 1, _is_deleted 1 (so FINAL and the view hide it), _version the LSN of the
// batch's high watermark and _sluice_position its full text (source@LSN:seq). The server writes
// one block into one part (the table is not partitioned; the sink sets max_insert_block_size
// above the block's rows and turns async_insert off where the server has it), and a part is
// written to a temporary directory and renamed into the table: after a crash either the rows
// and the marker are both there or neither is. This holds the same way on old and new servers.
// Position reads the marker rows (a scan of the one-byte _sluice_marker column) and returns the
// highest; merges fold markers into the one with the highest version. Backfill chunks (zero Hi)
// write rows without a marker; the end of the backfill writes a marker alone.
//
// Do not run OPTIMIZE ... FINAL CLEANUP, or set clean_deleted_rows, on these tables: removing
// tombstones also removes the marker, and the table would look unbackfilled (it is then
// emptied and backfilled again: nothing is lost, but it costs a full copy).
//
// DiscardSnapshot truncates the table (rows and markers) and checks it is empty.
//
// # Types
//
//	int2, int4, int8          Int16, Int32, Int64
//	float4, float8            Float32, Float64
//	numeric(p,s), p <= 38     Decimal(p, s)
//	numeric (unconstrained)   String (the exact decimal text)
//	bool                      Bool (modern), UInt8 (compatible)
//	text, varchar, json(b),   String (JSON as its text)
//	  enums, inet, bytea
//	uuid                      UUID
//	date                      Date32 (modern: 1900 to 2299), Date (compatible: 1970 to 2149)
//	timestamp, timestamptz    DateTime64(6, 'UTC') (modern: 1900 to 2262),
//	                          DateTime('UTC') (compatible: 1970 to 2106, whole seconds)
//	time                      String, HH:MM:SS[.ffffff]
//	interval                  String, ISO 8601 (P1Y2M3DT4H5M6.5S)
//	arrays                    Array(Nullable(element))
//
// Non-key columns are Nullable, except arrays, which ClickHouse cannot make Nullable: a NULL
// array is stored as an empty array. Timestamps keep their microseconds on the modern layout;
// the compatible layout's DateTime keeps whole seconds and drops the fraction (the one lossy
// mapping, documented for old servers only), so a timestamp key column is refused there as
// poison naming the modern layout (keyHolds; CheckLayout for `sluice check`): two keys within
// one second would become one row. A date or timestamp outside its type's range is
// never clamped (the server would clamp silently): the batch stops as poison naming the table,
// column, row position and value. On old servers 1970-01-01 prints as 0000-00-00; it is stored
// exactly.
//
// The insert's block is filled straight from the batch's Arrow columns: each column is written
// in ClickHouse's Native column encoding, a few thousand values at a time, and decoded by the
// driver into the block it sends (no Go value per row). Decimals are narrowed to Decimal32 or
// Decimal64 by precision; a value wider than its column (only a damaged batch holds one) is
// poison naming its row, never wrapped. A block column whose type is not the one the sink writes
// (the table was altered outside Sluice) is poison naming both types and the ALTER that fixes it.
//
// Every commit is one part, and the server merges parts in the background: commit batches of
// thousands of rows, or at most a few per second per table. A table that commits faster than
// the server merges gets "too many parts" errors, which are transient: the commit is retried
// once merges catch up.
//
// # Errors
//
// A batch that does not fit its table (an unknown column, a type mismatch, a value out of range,
// a missing table) is poison; connection failures, timeouts, too many parts, memory limits and
// every unknown server error are transient and retried by the caller. New columns in the source
// or the metadata list are added with ALTER TABLE ADD COLUMN (and the compatible view is
// recreated); a changed type or key is poison, since ClickHouse cannot change either in place.
package clickhouse
