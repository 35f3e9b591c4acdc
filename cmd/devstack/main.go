// Command devstack starts, shows and stops the local services Sluice's demo and tests run
// against: PostgreSQL, the Temporal dev server, ClickHouse, gocaves and SeaweedFS (S3 and an
// Iceberg REST catalog), each on private ports
// under one work directory (.stack in the clone, or $SLUICE_STACK_DIR).
//
//	devstack start [service...]   start what is not running (all by default)
//	devstack status               show each service, its address and log
//	devstack env                  print shell exports of the addresses
//	devstack stop [service...]    stop what devstack started, by pid
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicecdc/sluice/testkit/devstack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	var dir, cache string
	open := func() (*devstack.Stack, error) {
		return devstack.New(dir, cache, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	}
	root := &cobra.Command{
		Use:           "devstack",
		Short:         "Start, show and stop Sluice's local services",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&dir, "dir", "", "work directory (default $SLUICE_STACK_DIR or .stack in the module root)")
	root.PersistentFlags().StringVar(&cache, "cache", "", "tool cache (default $SLUICE_CACHE or ~/.cache/sluice)")

	root.AddCommand(&cobra.Command{
		Use:   "start [service...]",
		Short: "Start the named services (all by default) unless they are running",
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				args = devstack.Services
			}
			for _, svc := range args {
				info, err := s.Ensure(cmd.Context(), svc)
				if err != nil {
					return err
				}
				printInfo(cmd, info)
			}
			return nil
		},
	})
	root.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Show each started service, whether it runs, its address and log",
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			status := s.Status()
			for _, svc := range devstack.Services {
				up, ok := status[svc]
				if !ok {
					fmt.Fprintf(cmd.OutOrStdout(), "%-11s not started\n", svc)
					continue
				}
				info, _ := s.Info(svc)
				state := "running"
				if !up {
					state = "DEAD (see log)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%-11s %-8s pid %-7d %s  log %s\n", svc, state, info.PID, info.Addr, info.Log)
			}
			return nil
		},
	})
	root.AddCommand(&cobra.Command{
		Use:   "env",
		Short: "Print shell exports of the running services' addresses",
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			for _, svc := range devstack.Services {
				if info, err := s.Info(svc); err == nil {
					for k, v := range devstack.Env(info) {
						fmt.Fprintf(cmd.OutOrStdout(), "export %s=%q\n", k, v)
					}
				}
			}
			return nil
		},
	})
	root.AddCommand(&cobra.Command{
		Use:   "stop [service...]",
		Short: "Stop the named services (all by default) by the pids devstack recorded",
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open()
			if err != nil {
				return err
			}
			return s.Stop(cmd.Context(), args...)
		},
	})
	return root
}

func printInfo(cmd *cobra.Command, info devstack.Info) {
	addr := info.Addr
	if info.Service == devstack.ServiceTemporal {
		addr += "  Web UI " + info.Extra["ui"]
	}
	if info.Service == devstack.ServiceWeed {
		addr = "catalog " + info.URL + "  S3 " + info.Extra["s3_endpoint"]
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%-11s ready  %s  (log %s)\n", info.Service, addr, info.Log)
}
