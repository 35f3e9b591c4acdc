package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/sinks/plugin"
	"github.com/sluicecdc/sluice/source"
)

// checkPlugin connects to a plugin sink as a worker does, prints its handshake (protocol
// version, capabilities) and asks its health. A plugin that cannot be reached, refuses the
// connection or is not serving is a problem. Other sinks: nothing to do.
func checkPlugin(ctx context.Context, cfg *config.Config, out io.Writer) []source.Problem {
	if cfg.Sink.Type != config.SinkPlugin || cfg.Sink.Plugin == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	subject := "sink plugin at " + cfg.Sink.Plugin.Address
	c, err := plugin.Open(ctx, *cfg.Sink.Plugin)
	if err != nil {
		return []source.Problem{{Subject: subject, Message: err.Error(),
			Fix: "start the plugin, check sink.plugin.address, sink.plugin.tls and sink.plugin.token against the plugin's settings"}}
	}
	defer c.Close(context.Background())
	hs := c.Handshake()
	fmt.Fprintf(out, "%s: %s\n", subject, hs)
	if !hs.OwnPosition {
		fmt.Fprintf(out, "%s: keeps no position of its own; the committed positions live in the out-of-sink position store\n", subject)
	}
	if err := c.Health(ctx); err != nil {
		return []source.Problem{{Subject: subject, Message: err.Error(), Fix: "check the plugin's own destination (its log says why it is not serving)"}}
	}
	return nil
}
