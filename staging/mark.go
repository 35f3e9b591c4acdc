package staging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gocloud.dev/blob"
)

// SlotMark is the furthest position a pipeline's reader ever confirmed to its replication slot,
// kept beside the pipeline's staged batches so that a slot created again under the same name
// (or advanced by hand) is recognized: its confirmed position is past the mark. Since is the
// slot's creation point as the pipeline's setup recorded it (0: unknown), which tells a mark of
// an earlier slot of the same name (set up again after a teardown) from one of this slot.
type SlotMark struct {
	Slot      string `json:"slot"`
	Since     uint64 `json:"since"`
	Confirmed uint64 `json:"confirmed"`
}

// markName is the object of a pipeline's slot mark: beside the tables' directories, and not a
// batch file, so listings never take it for one.
func markName(pipeline, slot string) string {
	return pipelinePrefix(pipeline) + "slot-" + escapeName(slot) + ".json"
}

// ReadSlotMark returns the mark of pipeline's slot; ok is false when none was written.
func (s *Store) ReadSlotMark(ctx context.Context, pipeline, slot string) (SlotMark, bool, error) {
	data, err := s.readSmall(ctx, markName(pipeline, slot))
	if err != nil {
		err = s.classify(err)
		if errors.Is(err, ErrNotFound) {
			return SlotMark{}, false, nil
		}
		return SlotMark{}, false, fmt.Errorf("reading the confirmed mark of slot %s of pipeline %s: %w", slot, pipeline, err)
	}
	var m SlotMark
	if err := json.Unmarshal(data, &m); err != nil {
		return SlotMark{}, false, fmt.Errorf("reading the confirmed mark of slot %s of pipeline %s (%s%s): %w",
			slot, pipeline, s.base, markName(pipeline, slot), err)
	}
	return m, true, nil
}

// WriteSlotMark replaces the mark of pipeline's slot; the object appears whole or not at all.
func (s *Store) WriteSlotMark(ctx context.Context, pipeline string, m SlotMark) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("writing the confirmed mark of slot %s: %w", m.Slot, err)
	}
	name := markName(pipeline, m.Slot)
	err = s.bucket.WriteAll(ctx, name, data, &blob.WriterOptions{ContentType: "application/json", BeforeWrite: privateFile})
	if err == nil && s.dir != "" {
		if cerr := os.Chmod(filepath.Join(s.dir, filepath.FromSlash(name))+".attrs", fileMode); cerr != nil && !errors.Is(cerr, os.ErrNotExist) {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("writing the confirmed mark of slot %s of pipeline %s: %w", m.Slot, pipeline, err)
	}
	return nil
}
