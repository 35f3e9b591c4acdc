package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/sluicecdc/sluice/batch"
	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin/sdk"
)

// nopSink is a plugin's sink that accepts everything.
type nopSink struct{}

func (nopSink) EnsureTable(context.Context, sinks.TableSpec) error { return nil }
func (nopSink) Position(context.Context, sinks.TableSpec) (batch.SourcePosition, bool, error) {
	return batch.SourcePosition{}, false, nil
}
func (nopSink) Apply(context.Context, sinks.Batch) error               { return nil }
func (nopSink) DiscardSnapshot(context.Context, sinks.TableSpec) error { return nil }
func (nopSink) Close(context.Context) error                            { return nil }

func TestCheckPluginPrintsHandshake(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sdk.Serve(ctx, nopSink{}, sdk.ServeOptions{Listener: lis, Name: "nop", Version: "0.1"})
	}()
	t.Cleanup(cancel)
	cfg := &config.Config{Sink: config.Sink{Type: config.SinkPlugin, Plugin: &config.Plugin{Address: lis.Addr().String()}}}
	var out bytes.Buffer
	if ps := checkPlugin(t.Context(), cfg, &out); len(ps) != 0 {
		t.Fatalf("problems %v with a running plugin", ps)
	}
	for _, want := range []string{"plugin nop 0.1, protocol version 1, own position false, deletes true, maintenance false", "out-of-sink position store"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check printed %q, want it to contain %q", out.String(), want)
		}
	}

	cancel()
	<-done
	out.Reset()
	ps := checkPlugin(t.Context(), cfg, &out)
	if len(ps) != 1 || !strings.Contains(ps[0].String(), "sink plugin at "+lis.Addr().String()) || !strings.Contains(ps[0].String(), "start the plugin") {
		t.Fatalf("problems %v with the plugin stopped; want one naming it and the fix", ps)
	}
}
