package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicecdc/sluice/control"
	"github.com/sluicecdc/sluice/source"
)

// setupTemporalCmd registers Sluice's search attributes in the config's Temporal namespace: what
// a user's own cluster needs once before `sluice start` (the dev server of `make demo` has them).
func setupTemporalCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "setup-temporal",
		Short: "Register Sluice's search attributes (SluicePipeline, SluiceTable, SluicePhase) in the config's Temporal namespace; idempotent",
		Args:  cobra.NoArgs,
		RunE: withClient(a, func(cmd *cobra.Command, _ []string) error {
			ns := a.cfg.Temporal.Namespace
			added, err := control.RegisterSearchAttributes(cmd.Context(), a.client, ns)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(added) == 0 {
				fmt.Fprintf(out, "Temporal namespace %s already has Sluice's search attributes\n", ns)
				return nil
			}
			fmt.Fprintf(out, "registered search attributes %s in Temporal namespace %s\n", strings.Join(added, ", "), ns)
			return nil
		}),
	}
}

// checkSearchAttributes is `sluice check`'s look at Temporal: a problem for each missing search
// attribute, with the command that registers them. Temporal unreachable is printed as not
// checked, not as a problem of the pipeline.
func checkSearchAttributes(ctx context.Context, a *app, out io.Writer) []source.Problem {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := a.open(ctx); err != nil {
		fmt.Fprintf(out, "could not check Temporal's search attributes: %v\n", err)
		return nil
	}
	defer a.close()
	ns := a.cfg.Temporal.Namespace
	missing, err := control.MissingSearchAttributes(ctx, a.client, ns)
	if err != nil {
		fmt.Fprintf(out, "could not check Temporal's search attributes: %v\n", err)
		return nil
	}
	if len(missing) == 0 {
		return nil
	}
	return []source.Problem{{
		Subject: "Temporal namespace " + ns,
		Message: fmt.Sprintf("lacks Sluice's search attributes %s: its workflows cannot start", strings.Join(missing, ", ")),
		Fix: fmt.Sprintf("run `sluice setup-temporal --config %s`, or with the Temporal CLI:\n%s",
			a.configPath, strings.TrimRight(control.SearchAttributeCommands(ns), "\n")),
	}}
}
