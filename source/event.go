package source

import (
	"time"

	"github.com/sluicecdc/sluice/batch"
)

// Event is one thing the stream hands to its caller: *BeginEvent, *ChangeEvent,
// *TruncateEvent, *RelationEvent, *SchemaEvent, *CommitEvent or *ProgressEvent.
type Event interface{ event() }

// BeginEvent starts a transaction. Every change until the CommitEvent shares its commit LSN.
type BeginEvent struct {
	LSN      uint64 // the commit LSN of the transaction (pgoutput's final LSN)
	CommitTS time.Time
	Xid      uint32
}

// ChangeEvent is one row change of one table. Change.Values follow the table's current schema
// (the last SchemaEvent for the table, or the schema the stream was given).
type ChangeEvent struct {
	Table  batch.TableName
	Change batch.Change
}

// TruncateEvent says the table was truncated at Pos: every row with a lower position is gone.
type TruncateEvent struct {
	Table           batch.TableName
	Pos             batch.Position
	CommitTS        time.Time
	Cascade         bool
	RestartIdentity bool
}

// RelationEvent reports every RELATION message of a table the stream knows (one of its schemas,
// or one a SchemaEvent announced), before the SchemaEvent it may lead to. pgoutput sends one
// before a table's first change on a connection and again after the table's catalog entry was
// invalidated (any ALTER TABLE, a rewrite, a re-created table of the same name): it is the
// stream's cue to check what the WAL cannot show. RelationID is the relation's OID as of the WAL
// being decoded; Pos is the position of the last event before it (it takes no sequence number of
// its own, so the positions of the changes do not depend on when pgoutput chose to send it).
type RelationEvent struct {
	Table      batch.TableName
	RelationID uint32
	Pos        batch.Position
}

// SchemaEvent reports that the columns of a table as pgoutput describes them differ from the
// schema known so far (or that the table was not known). Changes from Pos on follow New.
type SchemaEvent struct {
	Table batch.TableName
	Pos   batch.Position
	// Old is nil when the table was not known to the stream: with a FOR TABLE publication that
	// is a pipeline table renamed while the stream was down, or a table added to the
	// publication by hand; the caller must not guess which and should stop the table.
	Old *batch.Schema
	New batch.Schema
	// Added, Dropped and Retyped name the columns that appeared, disappeared or changed type
	// (type, type modifier or domain). A column renamed in place is in RenamedColumns instead.
	Added, Dropped, Retyped []string
	// RenamedColumns are the columns renamed in place (see renames for how they are told from a
	// column dropped and another added).
	RenamedColumns []ColumnRename
	// Renamed is set when the table itself was renamed or moved to another schema: Old.Table
	// holds the old name.
	Renamed bool
	// Identity is set when the table's replica identity no longer carries its key (identityLost):
	// what it is now. Deletes (and key changes) would arrive without the key they remove.
	Identity string
	// Attnums are the catalog's attnums of New's columns when the RELATION was decoded (nil:
	// not read). A caller that records them with New gives them back in StreamOptions.Attnums,
	// so that a later run tells a rename from a drop and an add at the table's first RELATION.
	Attnums map[string]int16
}

// CommitEvent ends a transaction. After the handler returns nil for it, the stream's own
// position moves to EndLSN.
type CommitEvent struct {
	LSN      uint64 // the commit LSN, the same as the BeginEvent's
	EndLSN   uint64 // the end of the commit record
	CommitTS time.Time
}

// ProgressEvent comes at least every ProgressInterval and whenever a keepalive moves the stream's
// position while no transaction is open, so the caller can heartbeat and cut batches by time
// even when no change arrives. StreamLSN is the position the stream would confirm if the caller
// held nothing; InTxn says a transaction is open. CaughtUp says a server keepalive brought it,
// between transactions and past the position the stream started at: the server had sent what it
// had decoded and waited for more WAL (it also sends one at the start, which does not count, and
// one every wal_sender_timeout/2 of a long decode).
type ProgressEvent struct {
	StreamLSN uint64
	InTxn     bool
	CaughtUp  bool
}

func (*BeginEvent) event()    {}
func (*ChangeEvent) event()   {}
func (*TruncateEvent) event() {}
func (*RelationEvent) event() {}
func (*SchemaEvent) event()   {}
func (*CommitEvent) event()   {}
func (*ProgressEvent) event() {}
