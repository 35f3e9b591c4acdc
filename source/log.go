package source

// Log field names (snake_case, shared with the rest of sluice).
const (
	logSlot        = "slot"
	logLSN         = "lsn"
	logTable       = "table"
	logPublication = "publication"
)
