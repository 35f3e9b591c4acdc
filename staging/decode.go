package staging

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicecdc/sluice/batch"
)

// Decode decodes the content of a staged batch file (batch.WriteFile's format) and checks that
// it holds the batch ref names. The caller releases the record.
func Decode(mem memory.Allocator, data []byte, ref BatchRef) (arrow.RecordBatch, batch.FileHeader, error) {
	rec, h, err := batch.ReadFile(bytes.NewReader(data), mem)
	if err != nil {
		return nil, h, err
	}
	if h.Table != ref.Table || h.Lo != ref.Lo || h.Hi != ref.Hi {
		rec.Release()
		return nil, h, fmt.Errorf("the file holds batch %s[%s..%s], not the one staged under its name", h.Table, h.Lo, h.Hi)
	}
	return rec, h, nil
}
