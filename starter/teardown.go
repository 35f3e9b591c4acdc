package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/sluicecdc/sluice/pipeline"
	"github.com/sluicecdc/sluice/source"
)

// teardownWait is how long teardown lets the stopped reader close its stream before it ends the
// walsender itself.
const teardownWait = 20 * time.Second

func teardownCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "teardown",
		Short: "Stop the pipeline, drop its replication slot and publication (the sinks keep their data); needs --yes",
		Args:  cobra.NoArgs,
		RunE: withClient(a, func(cmd *cobra.Command, _ []string) error {
			sc, err := pipeline.SourceConfigs(a.cfg)(a.cfg.Pipeline)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !yes {
				fmt.Fprintf(out, "teardown stops pipeline %s, drops replication slot %s and publication %s: the changes the slot holds are released, "+
					"and a later start begins a new slot from which every table must be resynced\n", a.cfg.Pipeline, sc.Slot, sc.Publication)
				return errors.New("refusing without --yes")
			}
			if err := stopWorkflows(cmd, a, "stopped by sluice teardown"); err != nil {
				return err
			}
			ctx := cmd.Context()
			before, err := source.ReadSlotState(ctx, nil, sc.DSN, sc.Slot)
			if err != nil {
				return err
			}
			if err := dropWhenReleased(ctx, sc, out); err != nil {
				return err
			}
			if before.Exists {
				fmt.Fprintf(out, "dropped replication slot %s (it retained %s of WAL)\n", sc.Slot, bytesText(before.RetainedBytes))
			} else {
				fmt.Fprintf(out, "replication slot %s: did not exist\n", sc.Slot)
			}
			fmt.Fprintf(out, "dropped publication %s (if it existed)\n", sc.Publication)
			fmt.Fprintf(out, "kept: every table's target in the %s sink with its rows and committed position (", a.cfg.Sink.Type)
			for i, t := range a.cfg.Tables {
				if i > 0 {
					fmt.Fprint(out, ", ")
				}
				fmt.Fprint(out, t.Target)
			}
			fmt.Fprintf(out, "), the staged batch files under %s, and the workflows' histories in Temporal. "+
				"Drop the targets and delete the staging files yourself if the pipeline is gone for good; "+
				"after a new `sluice start`, each table stops with PositionGap until `sluice resync --table` backfills it.\n", a.cfg.Staging.URL)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "really drop the slot and the publication")
	return cmd
}

// dropWhenReleased drops the slot and the publication once the stopped reader has let go of the
// slot; a reader still streaming after teardownWait (its worker cannot reach Temporal to learn
// that the workflow ended) has its walsender ended.
func dropWhenReleased(ctx context.Context, sc source.Config, out io.Writer) error {
	deadline := time.Now().Add(teardownWait)
	for {
		err := source.Teardown(ctx, sc)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" { // 55006: the slot is active
			return err
		}
		if time.Now().After(deadline) {
			pid, err := source.EndSlotStream(ctx, sc.DSN, sc.Slot)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "ended the walsender (pid %d) still reading slot %s\n", pid, sc.Slot)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
