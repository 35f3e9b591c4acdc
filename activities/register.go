package activities

import "go.temporal.io/sdk/worker"

// Set is every activity struct a worker registers. A nil member is not registered (a worker
// can serve only some concerns).
type Set struct {
	Commit   *Commit
	Backfill *Backfill
	Setup    *Setup
	Reader   *Reader
}

// Register registers the set's activities under their method names (CommitBatch, LoadTable, ...),
// the names the workflows call them by. Backfill activities run in sessions: the worker must be
// created with worker.Options{EnableSessionWorker: true}.
func (s Set) Register(r worker.ActivityRegistry) {
	if s.Commit != nil {
		r.RegisterActivity(s.Commit)
	}
	if s.Backfill != nil {
		r.RegisterActivity(s.Backfill)
	}
	if s.Setup != nil {
		r.RegisterActivity(s.Setup)
	}
	if s.Reader != nil {
		r.RegisterActivity(s.Reader)
	}
}
