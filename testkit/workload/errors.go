package workload

import "errors"

// ErrNoTable is returned for a table the workload does not define.
var ErrNoTable = errors.New("no such workload table")
