// Package activities holds the Temporal activities that the workflows in package workflows drive,
// one struct per concern: Commit (the sink side of one table: ensure the target, load its
// committed position and staged batches, commit one staged batch), Backfill (the backfill, run in
// a session pinned to the worker that holds the exported snapshot), Setup (slot, publication and
// one TableWorkflow per table) and Reader (the long-running pgoutput reader that stages batches).
// The engines they run know nothing of Temporal: package commit (CommitBatch), package reader
// (ReadStream), package backfill (the snapshot copy).
//
// Code that knows a failure cannot be retried marks it where it happens (package failure); an
// activity gives an unmarked permanent failure of the source or a sink its type, and every
// activity turns the marked error it returns into a non-retryable ApplicationError of the mark's
// type in one function (toTemporal, errors.go); everything else is transient and retried by the
// workflow's retry policy, forever, with backoff.
package activities
