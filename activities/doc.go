// Package activities holds the Temporal activities that the workflows in package workflows drive,
// one struct per concern: Commit (the sink side of one table: ensure the target, load its
// committed position and staged batches, commit one staged batch), Backfill (the backfill, run in
// a session pinned to the worker that holds the exported snapshot), Setup (slot, publication and
// one TableWorkflow per table) and Reader (the long-running pgoutput reader that stages batches).
//
// Activities are where failures get their class: an error a retry cannot fix becomes a
// non-retryable ApplicationError with one of the stable types below, once, here; everything
// else is transient and retried by the workflow's retry policy, forever, with backoff.
package activities
