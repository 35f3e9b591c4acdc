package source

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// ownerProblems refuses a slot name that belongs to another pipeline: a publication of this
// database other than the pipeline's records the slot (whether or not the slot exists now: a
// dropped slot's name stays its pipeline's, whose setup would otherwise adopt the new one), or
// the pipeline's own publication records it for another pipeline. Two pipelines sharing a slot
// would share a source identity and confirm each other's changes away. (A slot of another
// database, a physical slot and one of another plugin are slotProblems.)
func ownerProblems(ctx context.Context, q querier, cfg Config) ([]Problem, error) {
	rows, err := q.Query(ctx, `
SELECT p.pubname, pg_catalog.obj_description(p.oid, 'pg_publication')
FROM pg_catalog.pg_publication p
WHERE pg_catalog.obj_description(p.oid, 'pg_publication') LIKE 'sluice: replication slot %'
ORDER BY p.pubname`)
	if err != nil {
		return nil, fmt.Errorf("reading the slot records of the database's publications: %w", err)
	}
	var (
		pub, comment string
		ps           []Problem
	)
	_, err = pgx.ForEachRow(rows, []any{&pub, &comment}, func() error {
		rec, err := parseSlotRecord(comment)
		if err != nil || !rec.Found || rec.Slot != cfg.Slot {
			return nil // a record that cannot be read names no slot this check can trust
		}
		if pub == cfg.Publication && (rec.Pipeline == "" || cfg.Pipeline == "" || rec.Pipeline == cfg.Pipeline) {
			return nil // the pipeline's own record
		}
		ps = append(ps, ownerProblem(cfg, pub, rec))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the slot records of the database's publications: %w", err)
	}
	return ps, nil
}

// ownerProblem is the refusal of a slot recorded on publication pub for another pipeline.
func ownerProblem(cfg Config, pub string, rec slotRecord) Problem {
	owner := "another pipeline"
	if rec.Pipeline != "" {
		owner = "pipeline " + strconv.Quote(rec.Pipeline)
	}
	this := "this pipeline"
	if cfg.Pipeline != "" {
		this = "pipeline " + strconv.Quote(cfg.Pipeline)
	}
	return Problem{
		Subject: "replication slot " + cfg.Slot,
		Message: fmt.Sprintf("belongs to %s: its publication %s records that slot (%s); sharing it, the two pipelines would confirm each other's changes away",
			owner, pub, rec.what()),
		Fix: fmt.Sprintf("choose another source.slot (and source.publication) for %s; if %s no longer exists, `sluice teardown --config <its file> --yes` drops its slot and publication %s",
			this, owner, pub),
	}
}

// what describes the record for an error message.
func (r slotRecord) what() string {
	return "created at " + lsnOrUnknown(r.LSN)
}

func lsnOrUnknown(lsn uint64) string {
	if lsn == 0 {
		return "an unknown position"
	}
	return formatLSN(lsn)
}
