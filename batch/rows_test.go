package batch

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rawRow is a change's values as a connection hands them over: nil for NULL.
func rawRow(c Change) [][]byte {
	raw := make([][]byte, len(c.Values))
	for i, v := range c.Values {
		if !v.Null {
			raw[i] = v.Text
		}
	}
	return raw
}

// TestAppendTextBuildsWhatBuildBuilds: rows appended one at a time from their text make the
// same record as Build of the same changes, and a bad row drops what was appended.
func TestAppendTextBuildsWhatBuildBuilds(t *testing.T) {
	snapshotRows := ordersChanges(200)
	for i := range snapshotRows {
		snapshotRows[i].Op, snapshotRows[i].Pos = OpSnapshot, Position{LSN: 0x7000}
	}
	withNulls := ordersChanges(10)
	withNulls[3].Values[6], withNulls[7].Values[1] = null, null
	badKey := ordersChanges(10)
	badKey[5].Values[0] = null
	badValue := ordersChanges(10)
	badValue[2].Values[1] = txt("not a number")

	tests := []struct {
		name    string
		rows    []Change
		wantErr error
	}{
		{name: "stream rows", rows: ordersChanges(100)},
		{name: "snapshot rows", rows: snapshotRows},
		{name: "NULL values", rows: withNulls},
		{name: "NULL key", rows: badKey, wantErr: ErrMalformedValue},
		{name: "unconvertible value", rows: badValue, wantErr: ErrMalformedValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			streamed, err := NewRecordBuilder(mem, ordersSchema)
			if err != nil {
				t.Fatal(err)
			}
			defer streamed.Release()
			streamed.Reserve(len(tt.rows))
			var appendErr error
			for i := range tt.rows {
				if appendErr = streamed.AppendText(&tt.rows[i], rawRow(tt.rows[i]), t0); appendErr != nil {
					break
				}
			}
			if tt.wantErr != nil {
				var ve *ValueError
				if !errors.As(appendErr, &ve) || !errors.Is(appendErr, tt.wantErr) {
					t.Fatalf("AppendText error = %v, want a ValueError of kind %s", appendErr, tt.wantErr)
				}
				rec := streamed.NewRecord()
				defer rec.Release()
				if rec.NumRows() != 0 {
					t.Fatalf("after the error the next record has %d rows, want the failed rows dropped", rec.NumRows())
				}
				return
			}
			if appendErr != nil {
				t.Fatal(appendErr)
			}
			got := streamed.NewRecord()
			defer got.Release()

			built, err := NewRecordBuilder(mem, ordersSchema)
			if err != nil {
				t.Fatal(err)
			}
			defer built.Release()
			want, err := built.Build(tt.rows, t0)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Release()
			if !array.RecordEqual(got, want) {
				t.Fatalf("AppendText's record differs from Build's:\n got %v\nwant %v", got, want)
			}
		})
	}
}
