package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/staging"
)

// tableSignals receives a TableWorkflow's signals into its state.
type tableSignals struct {
	batch, batches, pause, resume, resync workflow.ReceiveChannel
	stop                                  workflow.ReceiveChannel
	sel                                   workflow.Selector
}

func newTableSignals(ctx workflow.Context, t *table) *tableSignals {
	s := &tableSignals{
		batch:   workflow.GetSignalChannel(ctx, SignalBatch),
		batches: workflow.GetSignalChannel(ctx, SignalBatches),
		pause:   workflow.GetSignalChannel(ctx, SignalPause),
		resume:  workflow.GetSignalChannel(ctx, SignalResume),
		resync:  workflow.GetSignalChannel(ctx, SignalResync),
		stop:    workflow.GetSignalChannel(ctx, SignalStop),
		sel:     workflow.NewSelector(ctx),
	}
	s.sel.AddReceive(s.batch, func(c workflow.ReceiveChannel, _ bool) {
		var ref staging.BatchRef
		c.Receive(ctx, &ref)
		t.takeRef(ctx, ref)
	})
	s.sel.AddReceive(s.batches, func(c workflow.ReceiveChannel, _ bool) {
		var refs []staging.BatchRef
		c.Receive(ctx, &refs)
		for _, ref := range refs {
			t.takeRef(ctx, ref)
		}
	})
	s.sel.AddReceive(s.pause, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		t.paused = true
	})
	s.sel.AddReceive(s.resume, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		t.paused = false
	})
	s.sel.AddReceive(s.resync, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		t.resync = true
	})
	s.sel.AddReceive(s.stop, func(c workflow.ReceiveChannel, _ bool) {
		var req StopRequest
		c.Receive(ctx, &req)
		t.stop = &req
	})
	return s
}

// drain takes every signal already delivered, before the run continues as new, so none is lost.
func (s *tableSignals) drain(ctx workflow.Context, t *table) {
	for {
		var ref staging.BatchRef
		if !s.batch.ReceiveAsync(&ref) {
			break
		}
		t.takeRef(ctx, ref)
	}
	for {
		var refs []staging.BatchRef
		if !s.batches.ReceiveAsync(&refs) {
			break
		}
		for _, ref := range refs {
			t.takeRef(ctx, ref)
		}
	}
	for s.pause.ReceiveAsync(nil) {
		t.paused = true
	}
	for s.resume.ReceiveAsync(nil) {
		t.paused = false
	}
	for s.resync.ReceiveAsync(nil) {
		t.resync = true
	}
	for {
		var req StopRequest
		if !s.stop.ReceiveAsync(&req) {
			break
		}
		t.stop = &req
	}
}

// takeRef takes a signalled batch (addRef); a ref of another table is a sender's bug, logged
// and dropped (its file stays staged for its own table's next load).
func (t *table) takeRef(ctx workflow.Context, ref staging.BatchRef) {
	if !t.addRef(ref) {
		workflow.GetLogger(ctx).Warn("dropping batch signalled to the wrong table",
			logkey.Batch, ref.String(), logkey.Table, t.in.Table().String())
	}
}
