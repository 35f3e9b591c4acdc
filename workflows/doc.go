// Package workflows drives a pipeline on Temporal. SourceWorkflow (one per pipeline) prepares the
// slot and publication, makes sure one TableWorkflow runs per table and runs the long-running
// reader activity, which stages batches and signals the tables. TableWorkflow (one per table)
// backfills the table when its sink holds no position, then commits the staged batches it is
// signalled, in position order, through the CommitBatch activity (a backlog's consecutive
// batches grouped into one commit).
//
// Histories carry references and positions only, never row data. Names shared with the worker,
// the starter and the activities (task queue, workflow types and IDs, signals, queries, search
// attributes) live in names.go.
package workflows
