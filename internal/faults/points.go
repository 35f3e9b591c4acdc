package faults

// EnvVar is the environment variable a worker built with the faults tag reads its faults from.
// A worker built without it ignores the variable (and says so at startup). Testing only.
const EnvVar = "SLUICE_FAULTS"

// Point names a place in the code where a fault can fire.
type Point string

// The points of CommitBatch (package activities), in the order a commit passes them.
const (
	// CommitBeforeWrite is just before the sink write (data and position) of a batch.
	CommitBeforeWrite Point = "commit.before-write"
	// CommitAfterWrite is after the sink write succeeded, before the staged file is acknowledged.
	CommitAfterWrite Point = "commit.after-write"
	// CommitAfterAck is after the staged file is acknowledged, before the activity returns.
	CommitAfterAck Point = "commit.after-ack"
	// CommitAckBeforeWrite is a mutation: at the place of CommitBeforeWrite the staged file is
	// acknowledged first, then the process is killed before the sink write. It breaks the
	// commit path deliberately, to prove that the fault suites find the rows it loses.
	CommitAckBeforeWrite Point = "commit.ack-before-write"
)

// The points of a backfill's CopySnapshot (package activities).
const (
	// SnapshotAfterWrite is after a sink write of snapshot rows, before the copy reads on: with
	// the hang action the copy stops there holding its session, so a test can kill the worker
	// on a partly written snapshot whatever the machine's speed.
	SnapshotAfterWrite Point = "snapshot.after-write"
)

// The point of every activity the worker runs.
const (
	// ActivityStart is the start of an activity of a given type on the worker (any activity the
	// worker runs: TableSchema, CommitBatch, CopySnapshot, ReadStream, ...), before the activity's
	// own code. Its argument is the activity type, not a table:
	//
	//	SLUICE_FAULTS=activity.start:kill@2:LoadTable
	//
	// kills the worker as it starts its second LoadTable. The recovery-time tests use it to lose a
	// worker in every kind of activity. The hook is a worker interceptor that only a build with the
	// faults tag has (package worker, faults_armed.go).
	ActivityStart Point = "activity.start"
)
