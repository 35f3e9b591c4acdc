// Package source is the Postgres end of the data path: it prepares a pipeline's publication and
// logical slot, reads tables under an exported snapshot for the backfill, and streams the slot
// (pgoutput) as per-table changes for the batch buffer.
//
// # Setup and preflight
//
// Setup checks the database (wal_level, the role's REPLICATION attribute, each table's existence,
// privileges, key and replica identity, column types against batch's Arrow mapping, the
// publication's row filters and column lists, the slot's plugin and state) and reports every
// problem at once with the setting, table or column and the fix. It then creates the publication
// FOR TABLE the configured tables (before the slot: a slot cannot decode WAL older than its
// publication) and the pgoutput slot, and identifies the source (system id, timeline, slot).
//
// # Positions
//
// A stream change is at (commit LSN, n) where n counts the transaction's events from 1. A
// snapshot row is at (S, 0), S being the snapshot's consistent LSN. A change belongs to the
// snapshot exactly when its commit LSN is below S; see Snapshot.
//
// # The stream and the safe position
//
// Stream.Run calls a Handler with BeginEvent, ChangeEvent, TruncateEvent, SchemaEvent,
// CommitEvent and ProgressEvent values, in stream order, on the caller's goroutine. A receiving
// goroutine reads ahead (bounded), answers keepalives and sends a standby status update at least
// every StatusInterval, even while the handler is busy. The flush position it sends is the
// caller's safe position (SafeFunc): the commit LSN of the lowest change the caller still holds,
// since a slot re-sends every transaction committing at or after its confirmed position. When
// the caller holds nothing, it is the stream's own position: the end of the last transaction the
// handler accepted, or the server's WAL end from a keepalive received between transactions, so
// a quiet pipeline does not retain WAL. Confirmation never moves backwards and never passes what
// the caller allows.
//
// # Backfill
//
// OpenSnapshot exports a snapshot at LSN S (see Snapshot for why the split is exact);
// ReadChunk pages through a table by key ((k1, k2) > (...) ORDER BY k1, k2 LIMIT n) and
// Estimate gives a row count for progress. While a table is backfilled its SafeFunc
// contribution must be at or below the slot's confirmed position before OpenSnapshot (so the
// slot cannot move past S meanwhile) and (S, 0) afterwards, until its snapshot rows are
// committed. The stream's changes of that table with commit LSN below S are dropped; the rest
// are applied after the snapshot rows.
//
// # Unchanged TOAST values
//
// pgoutput sends 'u' instead of a large value an update did not change. Such a value is never
// written as NULL. It is resolved, in this order:
//
//  1. From the old tuple, when the table has REPLICA IDENTITY FULL (Postgres then logs the old
//     row with its TOASTed values inlined). The decoder does this.
//  2. From an earlier image of the same key in the same batch (batch.Collapser does this).
//  3. From the source itself: Fetcher.Fill reads the row's current value by key. A change left
//     Unchanged after this is an error (batch.ErrUnresolvedTOAST), never a NULL.
//
// Why reading the current value in step 3 can neither lose nor resurrect data: the change being
// filled is at position P and is outstanding, so the slot cannot have confirmed past P, and every
// transaction that committed after P is still ahead in the stream, to be applied after P in
// order. If the value changed after P, a later update carries it explicitly (a changed value is
// never 'u'), so the destination passes through a newer value and ends at the right one. If the
// row no longer exists, a later delete, key change or truncate in the stream removes it; Fill
// turns the change into a delete of its key (and of its old key), so nothing stale is written and
// nothing deleted comes back. The destination may briefly show a later state of the row, never
// an earlier or a wrong final one. docs/toast.md explains the strategy for operators.
//
// # Text values
//
// Values stay in Postgres' text output format (batch.Value). Both the replication connection and
// the snapshot connection run with the same settings (DateStyle ISO, IntervalStyle postgres,
// TimeZone UTC, extra_float_digits 3, bytea_output hex, UTF8), so both paths yield the same
// bytes for the same value, which batch's Arrow mapping parses.
package source
