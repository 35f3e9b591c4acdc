// Package staging keeps the batch files that travel between the reader and the committers. The
// reader writes each cut batch (an Arrow IPC file) here and signals the table's workflow with a
// small BatchRef; the table's CommitBatch activity opens the file, applies it to the sink and then
// acknowledges (deletes) it. Until it is acknowledged a staged batch holds the replication slot
// back, so a crash anywhere between staging and commit loses nothing.
//
// A Store is a local directory or an S3-compatible bucket, both through gocloud.dev/blob. Object
// names encode the pipeline, the table, the source and the batch's lo and hi positions in
// fixed-width hex, so a listing is in position order and can be filtered without reading any file,
// and staging the same range twice (a reader that restarted) overwrites the first file.
package staging
