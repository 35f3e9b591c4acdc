// Package plugin is the worker's side of a plugin sink: an external process, in any language,
// that serves the gRPC protocol of proto/sluice/plugin/v1 (the Go SDK, package sdk, serves it
// around an ordinary sinks.Sink). Open dials the plugin, checks its protocol version in the
// handshake and returns a Client, which is a sinks.Sink: each method is one call, a batch is
// streamed as Arrow IPC, and the plugin's errors come back classified (sinks.Poison, or
// transient) from the ErrorInfo detail of their status, never from their text.
//
// A plugin without the own_position capability keeps no position: its Client's Position
// answers "none" without a call, and the pipeline wraps the Client in the out-of-sink position
// store (Client.OwnPosition says which case holds).
package plugin
