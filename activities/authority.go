package activities

import (
	"fmt"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/failure"
)

// Authority is the worker's config as the judge of activity inputs: the only pipeline, slot,
// publication, sink and tables (source table and target) an input may name. Every activity
// checks its input against it before it touches the source, staging or a sink. A nil
// *Authority refuses everything: a worker without its config does no work. Key overrides and
// context columns are not compared: a config change to them reaches running tables with their
// next start.
type Authority struct {
	Pipeline    string
	Slot        string
	Publication string
	Sink        SinkRef
	// Tables are the configured tables: Pipeline, Spec.Target, Spec.Schema.Table and Sink set.
	Tables []TableConfig
}

// CheckTable returns a NotConfigured failure unless t is one of the configured
// tables of the worker's pipeline, with the configured target and sink; a table of the pipeline
// that the config does not list is TableRemoved.
func (a *Authority) CheckTable(t TableConfig) error {
	return a.checkTable(t, failure.TableRemoved)
}

// checkTable is CheckTable with the error type of a table the config does not list.
func (a *Authority) checkTable(t TableConfig, unlisted string) error {
	if err := a.checkPipeline(t.Pipeline); err != nil {
		return err
	}
	if t.Sink != a.Sink {
		return notConfigured("table %s asks for sink %q; this worker's config has sink %q", t.Table(), t.Sink.Name, a.Sink.Name)
	}
	for _, c := range a.Tables {
		if c.Table() != t.Table() {
			continue
		}
		if c.Spec.Target != t.Spec.Target {
			return notConfigured("table %s asks for target %q; this worker's config writes it to %q", t.Table(), t.Spec.Target, c.Spec.Target)
		}
		return nil
	}
	if unlisted == failure.TableRemoved {
		return failure.Newf(failure.TableRemoved,
			"refused: table %s is not in this worker's config of pipeline %s (tables[]): it was removed from the config, so its workflow stops; "+
				"its staged batches and its hold on the slot stay until `sluice remove --table %s`; to replicate it again, add it back to tables[] and run `sluice start`",
			t.Table(), a.Pipeline, t.Table())
	}
	return notConfigured("table %s is not in this worker's config of pipeline %s (tables[]); add it there, or start the pipeline from its config", t.Table(), a.Pipeline)
}

// CheckSource returns a NotConfigured failure unless pipeline is the worker's,
// slot and publication are its own (or empty: the configured ones) and every table passes
// CheckTable.
func (a *Authority) CheckSource(pipeline, slot, publication string, tables []TableConfig) error {
	if err := a.checkPipeline(pipeline); err != nil {
		return err
	}
	if slot != "" && slot != a.Slot {
		return notConfigured("pipeline %s asks for replication slot %q; this worker's config has slot %q (source.slot)", pipeline, slot, a.Slot)
	}
	if publication != "" && publication != a.Publication {
		return notConfigured("pipeline %s asks for publication %q; this worker's config has publication %q (source.publication)", pipeline, publication, a.Publication)
	}
	for _, t := range tables {
		if err := a.checkTable(t, failure.NotConfigured); err != nil {
			return err
		}
	}
	return nil
}

// Lists reports whether the config lists table (tables[].source).
func (a *Authority) Lists(table batch.TableName) bool {
	if a == nil {
		return false
	}
	for _, c := range a.Tables {
		if c.Table() == table {
			return true
		}
	}
	return false
}

// checkPipeline refuses another pipeline than the worker's, and everything when a is nil.
func (a *Authority) checkPipeline(pipeline string) error {
	if a == nil {
		return notConfigured("this worker has no pipeline config to check the input of pipeline %s against; it does no work", pipeline)
	}
	if pipeline != a.Pipeline {
		return notConfigured("the input is for pipeline %q; this worker serves pipeline %q: start a worker with that pipeline's config", pipeline, a.Pipeline)
	}
	return nil
}

// notConfigured is a failure of type NotConfigured.
func notConfigured(format string, args ...any) error {
	return failure.New(failure.NotConfigured, "refused: "+fmt.Sprintf(format, args...), nil)
}

// configured returns the worker's configured tables of the pipeline with the source's identity
// and the slot's creation point set (or, for a table that joined the publication later, the
// position it joined at): what SetupSource's result carried per table when the
// workflow input listed the tables. Tables absent from an input are read here, so the
// SourceWorkflow's payloads do not grow with the number of tables.
func (a *Authority) configured(src batch.SourceID, slotSince uint64, joined map[string]uint64) []TableConfig {
	if a == nil {
		return nil
	}
	out := make([]TableConfig, len(a.Tables))
	for i, t := range a.Tables {
		t.Spec.Schema = batch.Schema{Table: t.Table()}
		t.Source = &src
		t.SlotSince = max(slotSince, joined[t.Table().String()])
		out[i] = t
	}
	return out
}
