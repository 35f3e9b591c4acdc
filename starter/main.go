// Command sluice is the starter CLI: it starts a pipeline from its config file and shows,
// pauses, resumes, resyncs and stops it, all through Temporal. Workers (sluice-worker) do the
// work; this command only talks to the Temporal server the config names.
//
//	sluice check  --config pipeline.yaml            preflight the source: wal_level, keys, types; Temporal's search attributes
//	sluice setup-temporal --config pipeline.yaml   register the search attributes in the namespace (idempotent)
//	sluice input  --config pipeline.yaml [--table schema.table]
//	                                                print the SourceWorkflow (or a TableWorkflow) input for the Temporal CLI
//	sluice start  --config pipeline.yaml            start (or join) the pipeline's workflows
//	sluice status --config pipeline.yaml [--watch] [--output json] [--wide]
//	                                                the reader, the slot, per table: phase, position, rows, lag, error
//	sluice pause  --config pipeline.yaml [--table schema.table]
//	sluice resume --config pipeline.yaml [--table schema.table]
//	sluice resync --config pipeline.yaml --table schema.table
//	sluice stop   --config pipeline.yaml
//	sluice remove --config pipeline.yaml --table schema.table --yes
//	                                                forget a table removed from the config, release its hold on the slot
//	sluice teardown --config pipeline.yaml --yes    stop, drop the slot and the publication
//	sluice completion bash|zsh|fish|powershell      shell completion (no config needed)
//	sluice --version                                module version and commit
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/internal/temporalconn"
	"github.com/sluicecdc/sluice/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

// app is what every command shares: the config file and, once opened, the Temporal client.
type app struct {
	configPath string
	cfg        *config.Config
	client     client.Client
}

func (a *app) open(ctx context.Context) error {
	cfg, err := config.Load(a.configPath)
	if err != nil {
		return err
	}
	a.cfg = cfg
	c, err := temporalconn.Dial(ctx, cfg.Temporal, client.Options{
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return err
	}
	a.client = c
	return nil
}

func (a *app) close() {
	if a.client != nil {
		a.client.Close()
	}
}

func newRoot() *cobra.Command {
	a := &app{}
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Start and operate Sluice pipelines (PostgreSQL to Iceberg, ClickHouse, Couchbase)",
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVarP(&a.configPath, "config", "c", "", "pipeline config file (YAML); see docs/config.md")
	root.AddCommand(checkCmd(a), inputCmd(a), startCmd(a), statusCmd(a), pauseCmd(a), resumeCmd(a), resyncCmd(a), stopCmd(a), teardownCmd(a))
	root.AddCommand(removeCmd(a))
	root.AddCommand(setupTemporalCmd(a))
	// --config is required by these commands, not by the ones cobra adds (completion, help),
	// which a persistent required flag would break.
	for _, c := range root.Commands() {
		c.PreRunE = requireConfig(a)
	}
	return root
}

// requireConfig refuses a command run without --config, as cobra does for a required flag.
func requireConfig(a *app) func(*cobra.Command, []string) error {
	return func(*cobra.Command, []string) error {
		if a.configPath == "" {
			return errors.New(`required flag(s) "config" not set`)
		}
		return nil
	}
}

// withClient wraps a command body with opening and closing the client.
func withClient(a *app, body func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := a.open(cmd.Context()); err != nil {
			return err
		}
		defer a.close()
		return body(cmd, args)
	}
}
