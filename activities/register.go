package activities

import "go.temporal.io/sdk/worker"

// Set is every activity struct a worker registers. A nil member is not registered (a worker
// can serve only some concerns).
type Set struct {
	Commit   *Commit
	Snapshot *Snapshot
	Setup    *Setup
	Reader   *Reader
}

// Register registers the set's activities under their method names (CommitBatch, LoadTable, ...),
// the names the workflows call them by. Snapshot activities run in sessions: the worker must be
// created with worker.Options{EnableSessionWorker: true}.
func (s Set) Register(r worker.ActivityRegistry) {
	if s.Commit != nil {
		r.RegisterActivity(s.Commit)
	}
	if s.Snapshot != nil {
		r.RegisterActivity(s.Snapshot)
	}
	if s.Setup != nil {
		r.RegisterActivity(s.Setup)
	}
	if s.Reader != nil {
		r.RegisterActivity(s.Reader)
	}
}
