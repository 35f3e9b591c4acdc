package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time span in a workflow input, written in JSON as the pipeline config writes it:
// a string such as "500ms", "1s" or "2m30s". For inputs written before, a JSON number is read as
// nanoseconds.
type Duration time.Duration

// MarshalJSON writes d as a duration string such as "1s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "1s", or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		p, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("cannot read %q as a duration: write a number with a unit, such as 500ms, 1s or 2m", s)
		}
		*d = Duration(p)
		return nil
	}
	var n int64
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("cannot read %s as a duration: want a string such as \"1s\" or a number of nanoseconds", data)
	}
	*d = Duration(n)
	return nil
}
