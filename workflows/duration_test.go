package workflows

import (
	"encoding/json"
	"testing"
	"time"
)

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    Duration
		wantErr bool
	}{
		{in: `"1s"`, want: Duration(time.Second)},
		{in: `"500ms"`, want: Duration(500 * time.Millisecond)},
		{in: `"2m30s"`, want: Duration(150 * time.Second)},
		{in: `1000000000`, want: Duration(time.Second)}, // nanoseconds, as inputs were written before
		{in: `0`, want: 0},
		{in: `"0s"`, want: 0},
		{in: `"1"`, wantErr: true}, // a string without a unit
		{in: `"soon"`, wantErr: true},
		{in: `1.5`, wantErr: true},
		{in: `true`, wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var d Duration
			err := json.Unmarshal([]byte(tc.in), &d)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Unmarshal(%s) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if err == nil && d != tc.want {
				t.Fatalf("Unmarshal(%s) = %s, want %s", tc.in, time.Duration(d), time.Duration(tc.want))
			}
		})
	}
}

// TestSourceInputMaxWait checks the round trip of max_wait in a SourceInput: written as "1s",
// read back from that and from the nanoseconds of inputs written before.
func TestSourceInputMaxWait(t *testing.T) {
	t.Parallel()
	out, err := json.Marshal(SourceInput{Pipeline: "p", MaxWait: Duration(1500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"pipeline":"p","slot":"","publication":"","max_wait":"1.5s"}`; string(out) != want {
		t.Fatalf("Marshal = %s, want %s", out, want)
	}
	for _, in := range []string{string(out), `{"pipeline":"p","max_wait":1500000000}`} {
		var got SourceInput
		if err := json.Unmarshal([]byte(in), &got); err != nil {
			t.Fatalf("Unmarshal(%s): %v", in, err)
		}
		if got.MaxWait != Duration(1500*time.Millisecond) {
			t.Errorf("Unmarshal(%s).MaxWait = %s, want 1.5s", in, time.Duration(got.MaxWait))
		}
	}
	// Zero stays out of the input (the reader's default applies).
	if out, _ := json.Marshal(SourceInput{}); string(out) != `{"pipeline":"","slot":"","publication":""}` {
		t.Errorf("Marshal of zero max_wait = %s", out)
	}
}
