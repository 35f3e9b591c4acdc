// Package couchbase is the Couchbase sink: the last step of the data path for tables replicated
// into collections of one Couchbase bucket, through the KV service only (no query, search or
// views service is needed).
//
// # Targets and keys
//
// A target is [scope.]collection of the configured bucket (scope defaults to Config.Scope).
// EnsureTable creates the scope and the collection when missing. Each row is one document whose
// key is its primary key: the text of a single key column (42, a text value as is, a UUID in its
// canonical form, the other types as in the body below without JSON quoting), or for a composite
// key the texts of its columns with % written %25 and : written %3A, joined by :: (42::a%3Ab).
// Keys are at most 250 bytes; an empty or longer key is poison.
//
// # Bodies
//
// The body is a JSON object of every column, in table order, then the context columns the
// table's metadata names, under their names (the others are never written). NULL is null, and:
//
//	smallint, integer, bigint    number
//	real, double precision       number; NaN, Infinity, -Infinity as strings
//	numeric                      string holding the exact decimal ("12.50", "NaN")
//	boolean                      true / false
//	text, varchar, char, enums,  string (char keeps its padding)
//	  inet, cidr, name
//	json, jsonb                  the JSON value itself, embedded
//	bytea                        string, base64 (standard alphabet, padded)
//	date                         "2026-11-30" (ISO 8601; years outside 0000-9999 signed, 1 BC is 0000)
//	time                         "12:30:00.5"
//	timestamp                    "2026-11-30T12:30:00.5" (no zone)
//	timestamptz, __commit_ts,    "2026-11-30T11:30:00.5Z" (UTC)
//	  __ingest_ts
//	interval                     ISO 8601 duration as Postgres' iso_8601 style: "P1Y2MT3H4.5S"
//	uuid                         "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
//	arrays                       JSON arrays of the above
//
// Fractions of seconds have at most 6 digits, trailing zeros removed. A body over 20 MiB is
// poison. Inserts, updates and snapshot rows are upserts; deletes are Remove, and removing a
// missing document is success.
//
// # Checkpoint and atomicity
//
// Each target has a checkpoint document, checkpoint::<collection>, in the metadata collection of
// its scope (Config.MetadataCollection, default sluice_meta), holding the committed position.
// Apply does not use a Couchbase transaction. It writes the batch's documents (at most
// Config.Concurrency operations in flight, each with Config.Durability), and only when every
// write has succeeded replaces the checkpoint with the batch's Hi by compare-and-swap. A snapshot
// chunk (zero Hi) writes its documents and leaves the position as it was, and a batch without
// rows commits its Hi alone, so a target shows a position only once its snapshot is complete.
// Why a crash between the documents and the checkpoint loses nothing and resurrects nothing:
//
//   - The checkpoint only ever names the Hi of a batch whose every document write was
//     acknowledged (with majority durability, replicated), so it never covers a row that is not
//     in the target. Nothing is lost.
//   - After a crash the checkpoint still holds the previous batch's Hi. CommitBatch reads it,
//     finds the crashed batch not covered and applies that same staged batch again in full.
//     The batch holds one row per key, so its writes commute: upserting a document again with the
//     same body and removing an already removed document are no-ops. Whatever subset the crashed
//     attempt wrote, the replay leaves exactly the batch's final image of each of its keys, and
//     keys outside the batch were never touched.
//   - Batches commit one at a time in position order, and Apply itself skips a batch whose Hi the
//     checkpoint covers and drops the rows of any batch at or below the checkpoint. A row older
//     than the last committed batch is never written again, so an insert cannot be replayed over
//     a later delete: nothing is resurrected.
//   - Between the crash and the replay a reader can see part of the crashed batch (newer values
//     of some of its keys). The target is then ahead of its checkpoint, never behind it.
//
// The argument needs the replay to be the same batch (the staged file the crashed attempt read),
// which is how CommitBatch retries. A checkpoint write that loses a compare-and-swap race (two
// workers committing one table) fails transiently, and the retry finds the batch covered. What
// the compare-and-swap cannot undo is a stale attempt's document writes: a worker cut off from
// Temporal that keeps writing batch N after another worker committed N+1 can put N's values back
// on keys N+1 also changed, until those keys change again. Writes stop as soon as the attempt's
// context is cancelled (heartbeat timeout), which bounds that window.
//
// EnsureTable creates missing collections. When the target collection itself was missing
// (dropped while the pipeline ran), it removes the target's checkpoint, so the table is
// backfilled rather than streamed into an empty collection.
//
// Why not a gocb transaction per batch: each document in a transaction costs a staged write and
// an unstaging write (and a read before a replace or remove) plus transaction records, and the
// unstaging after commit is not atomic for KV readers anyway. On gocaves a 1,000-insert
// transaction ran at about 950 documents/s (2,800 with 16 concurrent operations in the attempt),
// against about 8,500 for this scheme with majority durability. Plain durable writes with the
// checkpoint last give the same guarantee on replay.
//
// # Discarding a partial snapshot
//
// There is no way to list a collection's documents through KV alone, so while the table is in the
// snapshot phase, Apply first writes the keys of every upserted document to key-index chunks,
// keys::<collection>::<n> in the metadata collection (numbered without gaps, at most 1 MiB of
// keys each), and only then the documents. DiscardSnapshot marks the checkpoint as discarding,
// removes every indexed key (chunks of an attempt that never committed included), then the chunks
// and the checkpoint. The first committed stream-phase batch retires the index; discarding
// after that is poison, since stream-phase keys are not indexed.
//
// # Errors
//
// Poison: a document too large or a key Couchbase rejects, a table without a key, a target that is
// not a collection name, a checkpoint of another source, durability the bucket cannot give, a
// missing bucket, and a target collection dropped while the pipeline ran. Everything else
// (timeouts, temporary failures, overload, unreachable nodes) is transient.
package couchbase
