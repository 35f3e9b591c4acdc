package commit

import (
	"fmt"
	"strings"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/staging"
)

// SinkRef names a sink configured on the workers. Only the name travels in workflow inputs and
// history; the sink's connection settings and credentials stay in the workers' configuration.
type SinkRef struct {
	Name string `json:"name"`
}

// Table is one table of a pipeline as the commit engine, the activities and the TableWorkflow
// see it (activities.TableConfig is this type): it travels in workflow inputs, so its JSON field
// names are recorded in histories and never change.
type Table struct {
	Pipeline string          `json:"pipeline"`
	Spec     sinks.TableSpec `json:"spec"`
	Sink     SinkRef         `json:"sink"`
	// Key overrides the table's primary key (config tables[].key); empty means the primary key.
	Key []string `json:"key,omitempty"`
	// Source is the source the pipeline reads (set by SetupSource for the runs the pipeline
	// starts). When set, a position the target holds from another source stops the table before
	// anything is written; without it the first batch's commit notices.
	Source *batch.SourceID `json:"source,omitempty"`
	// SlotSince is the LSN the pipeline's slot was created at (set by SetupSource, and by the
	// starter's resume and resync; 0: unknown). A committed position older than it is a
	// PositionGap: the slot cannot deliver the changes in between.
	SlotSince uint64 `json:"slot_since,omitempty"`
}

// Table returns the source table's name.
func (t Table) Table() batch.TableName { return t.Spec.Schema.Table }

// Result says what a commit did. It is the CommitBatch activity's result: its JSON field names
// are recorded in workflow histories and never change.
type Result struct {
	// Position is the table's committed position afterwards (the hi of the last batch that
	// wrote rows; the position read before when none did).
	Position batch.SourcePosition `json:"position"`
	Rows     int64                `json:"rows"`    // rows applied
	Dropped  int64                `json:"dropped"` // rows at or below the committed position, not re-applied
	Skipped  bool                 `json:"skipped"` // the sink already held every batch
	// Schema is set when the batches were read with other columns than the table's spec (ADD
	// COLUMN upstream): the target was evolved, and the workflow adopts it for later batches.
	Schema *batch.Schema `json:"schema,omitempty"`
	// Refs is how many of the input's batches were committed and acknowledged, from the first:
	// a group stops before a batch read with other columns than the batches before it, for the
	// next commit. Results recorded before grouped commits lack it: they committed their one.
	Refs int `json:"refs,omitempty"`
	// Collapsed counts rows not applied because a later row of the group has the same key.
	Collapsed int64 `json:"collapsed,omitempty"`
}

// group is staged batches of one table committed together, in commit order.
type group []staging.BatchRef

// Range formats the group's range as the first batch's lo..the last one's hi.
func (g group) Range() string {
	return fmt.Sprintf("%s..%s", g[0].Lo.Position, g[len(g)-1].Hi.Position)
}

// Rows is the rows of the group's files.
func (g group) Rows() int64 {
	var n int64
	for _, r := range g {
		n += r.Rows
	}
	return n
}

// Files lists the staged files of the group.
func (g group) Files() string {
	uris := make([]string, len(g))
	for i, r := range g {
		uris[i] = r.URI
	}
	return strings.Join(uris, ", ")
}

// describe names the group the way errors do: "batch lo..hi (n rows, file)" for one batch,
// "n batches lo..hi (n rows, files ...)" for several.
func (g group) describe() string {
	if len(g) == 1 {
		return fmt.Sprintf("batch %s (%d rows, %s)", g.Range(), g.Rows(), g.Files())
	}
	return fmt.Sprintf("%d batches %s (%d rows, files %s)", len(g), g.Range(), g.Rows(), g.Files())
}
