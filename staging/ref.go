package staging

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicecdc/sluice/batch"
)

// BatchRef names one staged batch. It is what travels in workflow signals and activity inputs:
// a few hundred bytes of JSON, never row data.
type BatchRef struct {
	Pipeline string               `json:"pipeline"`
	Table    batch.TableName      `json:"table"`
	Lo       batch.SourcePosition `json:"lo"`    // position of the batch's first change
	Hi       batch.SourcePosition `json:"hi"`    // the batch's watermark, committed with its data
	Rows     int64                `json:"rows"`  // rows in the file (0 when not known)
	Bytes    int64                `json:"bytes"` // size of the file
	URI      string               `json:"uri"`   // the file in the staging store, set by Store.Put
	Phase    batch.Phase          `json:"phase"` // snapshot or stream
	// FirstCommit is the source commit time of the batch's first change (zero for snapshot
	// batches): how old the oldest change a table has not committed yet is, for lag in seconds.
	FirstCommit time.Time `json:"first_commit,omitzero"`
}

// Range formats the batch's range as lo..hi, the way errors and logs name a batch.
func (r BatchRef) Range() string {
	return fmt.Sprintf("%s..%s", r.Lo.Position, r.Hi.Position)
}

// DescribeRefs names consecutive refs in an error: "batch lo..hi" for one, "N batches lo..hi"
// (the first lo to the last hi) for several. refs must not be empty.
func DescribeRefs(refs []BatchRef) string {
	if len(refs) == 1 {
		return "batch " + refs[0].Range()
	}
	return fmt.Sprintf("%d batches %s..%s", len(refs), refs[0].Lo.Position, refs[len(refs)-1].Hi.Position)
}

// String formats the ref as pipeline/table[lo..hi], with the source when it is set.
func (r BatchRef) String() string {
	return fmt.Sprintf("%s/%s[%s]", r.Pipeline, r.Table, r.Range())
}

// Validate reports what is missing or inconsistent in a ref before it is staged.
func (r BatchRef) Validate() error {
	var errs []error
	if r.Pipeline == "" {
		errs = append(errs, errors.New("pipeline is empty"))
	}
	if r.Table.Schema == "" || r.Table.Name == "" {
		errs = append(errs, fmt.Errorf("table %q is not schema-qualified", r.Table.String()))
	}
	if r.Lo.Source != r.Hi.Source {
		errs = append(errs, fmt.Errorf("lo belongs to source %s but hi to %s", r.Lo.Source, r.Hi.Source))
	} else if r.Hi.Position.Less(r.Lo.Position) {
		errs = append(errs, fmt.Errorf("hi %s is before lo %s", r.Hi.Position, r.Lo.Position))
	}
	if r.Lo.Source.Slot == "" || r.Lo.Source.SystemID == "" {
		errs = append(errs, errors.New("source has no system id or slot"))
	}
	switch r.Phase {
	case batch.PhaseSnapshot, batch.PhaseStream:
	default:
		errs = append(errs, fmt.Errorf("phase %q is neither %q nor %q", r.Phase, batch.PhaseSnapshot, batch.PhaseStream))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("batch ref %s: %w", r, err)
	}
	return nil
}
