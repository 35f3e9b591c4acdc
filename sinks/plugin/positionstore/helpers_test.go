package positionstore_test

import (
	"encoding/json"

	"github.com/sluicecdc/sluice/examples/plugins/jsonl/jsonlsink"
)

// unmarshalRow decodes the row of a log line into v.
func unmarshalRow(l jsonlsink.Line, v any) error {
	raw, err := json.Marshal(l.Row)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
