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
//	hstore                       a JSON object, a NULL value null: {"a":"1","b":null}
//
// Fractions of seconds have at most 6 digits, trailing zeros removed. A body over 20 MiB is
// poison. Inserts, updates and snapshot rows replace the document's body; deletes remove the
// document, and removing a missing document is success. Each write goes through the position
// fence below.
//
// # The position fence
//
// Every document the sink writes carries, in the system extended attribute _sluice, the source
// position of the row that wrote it ({"pos":"0/16B3748:12","src":"<system id>/<timeline>/<slot>",
// "w":{"t<random>":0}}; src is absent for snapshot chunks, whose batches carry no source). A delete
// does not drop that record: it deletes the document and sets the attribute in one mutation, and
// Couchbase keeps system attributes on the tombstone; deleting a key that has no document creates
// a tombstone carrying it. Applications reading the documents do not see the attribute (a system
// xattr is returned only when asked for by name).
//
// Each row is written by compare-and-swap on that record: read the document's attribute and CAS,
// tombstones included (LookupIn with AccessDeleted); write nothing when the stored position is
// after the row's (from the same source, or unknown); else write the body and the new record in
// one mutation conditioned on that CAS: replace a live document, delete it, move a tombstone's
// record, revive a tombstone, or insert where there is nothing. A write that loses the race (CAS
// mismatch, a document or tombstone that appeared) reads again and decides again (at most 16
// rounds, then a transient error). So a row is only ever written over an older image of its key
// or none: no attempt, however stale, writes an older image over a newer one or re-creates a
// document a later delete removed. An insert or snapshot row tries the insert first, without
// reading (one round trip for a new key; it fails like a lost race where anything is stored).
//
// Reviving a tombstone needs ReviveDocument (Couchbase Server 7.1 and later), which is a CAS on
// the tombstone. A server without it (gocaves, which the tests use) ignores the CAS of a body write
// on a tombstone and revives one only through an insert; there the mutation removes the random
// write tag (w) it read in the tombstone's record, which fails if any write came in between: the
// same compare-and-swap by other means. The sink asks the bucket's capabilities at start.
//
// What the fence costs: a read before each update or delete (two round trips instead of one,
// pipelined under Config.Concurrency), about 100 bytes of attribute per document, and one
// tombstone per deleted key until the server purges it (the bucket's metadata purge interval,
// 3 days by default). Once purged, the position of that delete is forgotten: an attempt stale by
// more than the purge interval could insert the key again. Attempts stop when their heartbeat
// times out (seconds to minutes), far inside it. On gocaves a batch of 1,000 new keys went from
// about 6,000 to about 3,200 documents/s (see bench_test.go; the figures of one run of each,
// alternated, on a loaded machine).
//
// A record of another source than the row's is overwritten: positions of two sources have no
// order, and a target changes source only through DiscardSnapshot (which clears the records) or a
// dropped collection, since the checkpoint refuses a batch of another source.
//
// # Checkpoint and atomicity
//
// Each target has a checkpoint document, checkpoint::<collection>, in the metadata collection of
// its scope (Config.MetadataCollection, default sluice_meta), holding the committed position.
// Apply does not use a Couchbase transaction. It writes the batch's documents (at most
// Config.Concurrency in flight, each with Config.Durability), and only when every write has
// succeeded replaces the checkpoint with the batch's Hi by compare-and-swap. A snapshot chunk
// (zero Hi) writes its documents and leaves the position as it was, and a batch without rows
// commits its Hi alone, so a target shows a position only once its snapshot is complete. Why a
// crash between the documents and the checkpoint loses nothing and resurrects nothing:
//
//   - The checkpoint only ever names the Hi of a batch whose every document write was
//     acknowledged (with majority durability, replicated), so it never covers a row that is not
//     in the target. Nothing is lost.
//   - After a crash the checkpoint still holds the previous batch's Hi. CommitBatch reads it,
//     finds the crashed batch not covered and applies that same staged batch again in full.
//     Rewriting a document at the same position writes the same image, and removing an already
//     removed document is a no-op: the replay leaves exactly the batch's final image of each of
//     its keys, and keys outside the batch were never touched.
//   - No row is written over a newer one (the fence), so nothing is resurrected, whatever order
//     attempts write in. Apply also skips a batch whose Hi the checkpoint covers and drops the
//     rows of a batch at or below it, which saves the writes.
//   - Between the crash and the replay a reader can see part of the crashed batch (newer values
//     of some of its keys). The target is then ahead of its checkpoint, never behind it. That is
//     the one window left: documents are visible before the position that covers them, never an
//     older image after a newer one.
//
// A checkpoint write that loses its compare-and-swap (two attempts committing one table) fails
// transiently, and the retry finds the batch covered. A stale attempt overtaken between its read
// of the checkpoint and its writes (a worker cut off from Temporal that writes batch N after
// another worker committed N+1) writes only the keys N+1 did not change since, with N's images,
// which the retry of N had already written; its checkpoint write then fails.
//
// EnsureTable creates missing collections. When the target collection itself was missing
// (dropped while the pipeline ran), it removes the target's checkpoint, so the table is
// backfilled rather than streamed into an empty collection.
//
// Why not a gocb transaction per batch: each document in a transaction costs a staged write and
// an unstaging write (and a read before a replace or remove) plus transaction records, and the
// unstaging after commit is not atomic for KV readers anyway. On gocaves a 1,000-insert
// transaction ran at about 950 documents/s (2,800 with 16 concurrent operations in the attempt),
// against about 8,500 for this scheme with majority durability before the fence. Fenced durable
// writes with the checkpoint last give the same guarantee on replay and against stale attempts.
//
// # The key index and discarding a target
//
// There is no way to list a collection's documents through KV alone, so Apply keeps a key index:
// key-index chunks keys::<collection>::<n> in the metadata collection (numbered without gaps, at
// most 1 MiB of keys each), listing every key a batch created, in both phases. Apply first reads
// the fence of every row's key (the read the fence needs anyway, all of them before any write),
// then inserts one chunk with the keys whose write makes a document where there was none (an
// insert, or a tombstone brought back that the index does not list yet), then writes the
// documents. A key is in the index before its document exists, whatever crashes when; chunks of
// attempts that did not commit are kept (a new chunk goes after them), so a key they listed stays
// listed. The fence records the index's id (checkpoint.Index, random per index): a tombstone of a
// live document keeps it, so a key deleted and inserted again is not listed twice while the index
// lives. The index grows with the keys ever created in the target (about the key's length plus 3
// bytes each, plus a listing again for a key inserted after its tombstone was purged); it is
// emptied by a discard. Its cost: one chunk write per batch that creates keys (none for a batch
// of updates and deletes), and a batch's reads done before its writes instead of interleaved. On
// gocaves (BenchmarkApply, batches of 1,000 new keys, majority durability, concurrency 32, 20
// batches, three runs of each binary alternated on a loaded 2-core machine) the stream phase went
// from 4,927, 3,366 and 2,408 documents/s to 3,827, 3,710 and 4,157, the snapshot phase from 5,927,
// 7,117 and 7,239 to 7,290, 8,722 and 5,334: no cost that shows above the machine's noise.
//
// DiscardSnapshot (a partial snapshot, or a resync of a target that has streamed) marks the
// checkpoint as discarding, removes every indexed key (chunks of an attempt that never committed
// included), then the chunks and the checkpoint; the next index has a new id. A target that began
// streaming under a version that retired the index at the first stream batch has no index id and
// cannot be emptied: DiscardSnapshot is poison there, naming the collection to drop.
//
// # Errors
//
// Poison: a document too large or a key Couchbase rejects, a table without a key, a target that is
// not a collection name, a checkpoint of another source, durability the bucket cannot give, a
// missing bucket, and a target collection dropped while the pipeline ran. Everything else
// (timeouts, temporary failures, overload, unreachable nodes) is transient.
package couchbase
