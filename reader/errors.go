package reader

// SetupError is a failure retrying cannot fix: the pipeline's tables cannot be read as
// configured (a schema the batch package refuses, a table renamed under the reader). The
// operator fixes the source or the config and restarts the pipeline.
type SetupError struct {
	Msg string
	Err error // the cause; may be nil
}

func (e *SetupError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *SetupError) Unwrap() error { return e.Err }

// PoisonError is a batch that cannot be converted into a batch file: retrying reads the same
// changes again.
type PoisonError struct {
	Msg string
	Err error // the cause
}

func (e *PoisonError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *PoisonError) Unwrap() error { return e.Err }

// SourceError is a failure of the source while the reader was doing What (connecting, starting
// the stream, streaming). The stream's failures include the handler's: a SetupError or a
// PoisonError of a batch cut while streaming arrives wrapped in one. Whether it is permanent is
// the source's to say (source.IsPermanent).
type SourceError struct {
	What string
	Err  error
}

func (e *SourceError) Error() string { return e.What + ": " + e.Err.Error() }

// Unwrap returns the source's error.
func (e *SourceError) Unwrap() error { return e.Err }
