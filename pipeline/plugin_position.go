package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluicecdc/sluice/config"
	"github.com/sluicecdc/sluice/internal/logkey"
	"github.com/sluicecdc/sluice/sinks"
	"github.com/sluicecdc/sluice/sinks/plugin"
	"github.com/sluicecdc/sluice/sinks/plugin/positionstore"
)

// wrapPluginPosition is the sink the activities use for the plugin client c: c wrapped with the
// pipeline's position store (sink.plugin.position_store, by default in the source database). A
// plugin without its own position needs the store, which is created when missing. A plugin
// with its own position uses a store only when one exists (it was kept before the plugin
// gained the capability): its own position wins, and the store's stands in while it reports
// none, so the upgrade does not backfill again. On an error c is closed.
func wrapPluginPosition(ctx context.Context, cfg *config.Config, c *plugin.Client, log *slog.Logger) (sinks.Sink, error) {
	own := c.OwnPosition()
	st, err := positionstore.Open(ctx, positionstore.Options{
		DSN:      cfg.PositionStoreDSN(),
		Schema:   cfg.Sink.Plugin.PositionStore.Schema,
		Pipeline: cfg.Pipeline,
		Existing: own,
	})
	switch {
	case own && errors.Is(err, positionstore.ErrNoStore):
		log.InfoContext(ctx, "plugin keeps its own position; no position store", logkey.Plugin, c.Handshake().String())
		return c, nil
	case err != nil:
		_ = c.Close(ctx)
		return nil, fmt.Errorf("opening the position store of the plugin sink (sink.plugin.position_store; without it, the source database): %w", err)
	}
	log.InfoContext(ctx, "plugin positions kept in the position store", logkey.Plugin, c.Handshake().String(),
		logkey.OwnPosition, own, logkey.Schema, cfg.Sink.Plugin.PositionStore.Schema)
	return positionstore.Wrap(c, own, st), nil
}
