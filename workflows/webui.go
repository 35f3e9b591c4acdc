package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/staging"
)

// What the Temporal Web UI shows of a workflow without querying it, besides the static summary
// and details the client sets when it starts the workflow (package control): the current
// details a run keeps up to date (workflow.SetCurrentDetails: no history event, so
// setting them never changes a run's determinism) and a summary on every activity it schedules
// (ActivityOptions.Summary, in the ActivityTaskScheduled event's metadata, which replay does not
// compare).

// maxDetailsError bounds the last error in a workflow's current details; the status query and
// `sluice status --wide` carry the whole error.
const maxDetailsError = 600

// showDetails sets the run's current details from its state: phase, committed position, queue
// and lag, backfill progress, last error. Cheap; called where the state changes.
func (t *table) showDetails(ctx workflow.Context) {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**%s** · ", t.state))
	if t.hasPosition {
		b.WriteString(fmt.Sprintf("committed %s", t.position.Position))
	} else {
		b.WriteString("no committed position yet")
	}
	b.WriteString(fmt.Sprintf(" · %d rows in %d batches\n\n", t.rows, t.batches))
	if n := len(t.window) + t.beyond; n > 0 {
		b.WriteString(fmt.Sprintf("queue: %d staged batch(es), %s of WAL behind", n, byteSize(lagBytes(t.stagedHi, t.position))))
		if oldest := oldestCommit(t.window); !oldest.IsZero() {
			b.WriteString(fmt.Sprintf(", oldest change %s old", workflow.Now(ctx).Sub(oldest).Round(time.Second)))
		}
		b.WriteString("\n\n")
	}
	if s := t.progress; s != nil && t.state == StateBackfill {
		b.WriteString(fmt.Sprintf("backfill: %s\n\n", describeProgress(s)))
	}
	if t.lastError != "" {
		b.WriteString(fmt.Sprintf("last error: %s\n", truncate(t.lastError, maxDetailsError)))
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

// showSourceDetails sets a SourceWorkflow run's current details from its status.
func showSourceDetails(ctx workflow.Context, st SourceStatus) {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**%s** · run %d", st.Phase, st.Runs+1))
	if r := st.LastRead; r.Batches > 0 || r.Rows > 0 {
		b.WriteString(fmt.Sprintf(" · last reader run staged %d rows in %d batches up to %s, slot confirmed to %s",
			r.Rows, r.Batches, r.Position.Position, r.Confirmed.Position))
	}
	b.WriteString("\n\n")
	if st.LastError != "" {
		b.WriteString(fmt.Sprintf("last error: %s\n", truncate(st.LastError, maxDetailsError)))
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

// describeProgress is "45% (45000 of ~100000 rows, 3 chunks)".
func describeProgress(s *BackfillProgress) string {
	if s.EstimatedRows <= 0 {
		return fmt.Sprintf("%d rows copied", s.Rows)
	}
	return fmt.Sprintf("%d%% (%d of ~%d rows, %d chunks)", min(100*s.Rows/s.EstimatedRows, 100), s.Rows, s.EstimatedRows, s.Chunks)
}

// withSummary returns ctx with its activity options' Summary set: what the Web UI shows on the
// activity it schedules.
func withSummary(ctx workflow.Context, summary string) workflow.Context {
	o := workflow.GetActivityOptions(ctx)
	o.Summary = summary
	return workflow.WithActivityOptions(ctx, o)
}

// commitSummary is a CommitBatch's summary: "commit 0/1A2B..0/1A3C, 311 rows" (with the batch
// count when grouped).
func commitSummary(g []staging.BatchRef) string {
	var rows int64
	for _, r := range g {
		rows += r.Rows
	}
	s := fmt.Sprintf("commit %s..%s, %d rows", g[0].Lo.Position, g[len(g)-1].Hi.Position, rows)
	if len(g) > 1 {
		s += fmt.Sprintf(" in %d batches", len(g))
	}
	return s
}

// copySummary is a CopySnapshot's or CopyChunk's summary: where its slice starts.
func copySummary(what string, after []string, position batch.SourcePosition) string {
	from := "the start"
	if len(after) > 0 {
		from = "key (" + truncate(strings.Join(after, ", "), 80) + ")"
	}
	return fmt.Sprintf("copy %s from %s, snapshot at %s", what, from, position.Position)
}

// byteSize formats n bytes with a binary unit: "512 B", "1.5 MiB".
func byteSize(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// truncate cuts s to at most n bytes (on a rune boundary), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
