package staging

import "errors"

// ErrNotFound is returned when a staged batch is not in the store: it was acknowledged already, or
// it was staged in a different store than this worker's.
var ErrNotFound = errors.New("staged batch not found")

// ErrForeignURI is returned when a ref's URI does not point into this store: the worker that
// staged it was configured with a different staging location.
var ErrForeignURI = errors.New("staged batch is not in this staging store")
