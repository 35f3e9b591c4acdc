package batch

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func TestBinaryDatesAndTimestamps(t *testing.T) {
	be64 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	be32 := func(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
	for _, tc := range []struct {
		name    string
		got     func() (int64, error)
		want    int64
		wantErr error
	}{
		{"timestamp at the Postgres epoch", func() (int64, error) { x, err := binaryTimestamp(be64(0)); return int64(x), err }, 946684800000000, nil},
		{"timestamp before 1970", func() (int64, error) { x, err := binaryTimestamp(be64(-946684800000001)); return int64(x), err }, -1, nil},
		{"timestamp infinity", func() (int64, error) { x, err := binaryTimestamp(be64(math.MaxInt64)); return int64(x), err }, 0, ErrNotRepresentable},
		{"timestamp -infinity", func() (int64, error) { x, err := binaryTimestamp(be64(math.MinInt64)); return int64(x), err }, 0, ErrNotRepresentable},
		{"timestamp past int64 since 1970", func() (int64, error) { x, err := binaryTimestamp(be64(math.MaxInt64 - 1)); return int64(x), err }, 0, ErrNotRepresentable},
		{"timestamp of 4 bytes", func() (int64, error) { x, err := binaryTimestamp(be32(1)); return int64(x), err }, 0, ErrMalformedValue},
		{"date at the Postgres epoch", func() (int64, error) { x, err := binaryDate(be32(0)); return int64(x), err }, 10957, nil},
		{"date infinity", func() (int64, error) { x, err := binaryDate(be32(math.MaxInt32)); return int64(x), err }, 0, ErrNotRepresentable},
		{"date of 8 bytes", func() (int64, error) { x, err := binaryDate(be64(1)); return int64(x), err }, 0, ErrMalformedValue},
	} {
		got, err := tc.got()
		var ce *convError
		switch {
		case tc.wantErr == nil && (err != nil || got != tc.want):
			t.Errorf("%s: got %d, %v; want %d", tc.name, got, err, tc.want)
		case tc.wantErr != nil && (!errors.As(err, &ce) || !errors.Is(ce.kind, tc.wantErr)):
			t.Errorf("%s: error %v, want kind %v", tc.name, err, tc.wantErr)
		}
	}
}
