// Package workload drives the end-to-end tests of the data path with a seeded, reproducible
// workload and checks every sink against the source key by key.
//
// A Generator creates a fixed set of tables in a source database (Tables: a bigint key with a
// column of every type all three sinks carry natively, a composite key, a uuid key with TOASTed
// text, a column of every type carried as the text Postgres prints (extension types, money,
// timetz, ranges, a composite type, a two-dimensional array, an enum, domains, oid), and a
// partitioned table), fills them, and runs random operations on them: inserts, updates,
// deletes, primary-key changes (moving rows between partitions among them), partitions created
// and attached while running, transactions touching several tables, one large transaction,
// and updates that leave a TOASTed value unchanged. Everything it does follows from its seed, and
// the seed is part of every error and report, so a failure can be replayed.
//
// The checker (Check) reads the source and a sink as their users would and reports the first
// differences, each classified as missing (in the source, not in the sink), extra (in the sink,
// deleted in the source), stale (different values) or duplicated (a key visible twice in the
// sink). Values are compared in one canonical text per type (see Canon); what a sink cannot
// represent exactly is mapped on the source side by the sink's Expect (see each reader).
package workload
