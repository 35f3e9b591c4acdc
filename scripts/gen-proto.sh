#!/usr/bin/env bash
# Regenerates the Go code of the plugin protocol (sinks/plugin/proto/...) from its .proto.
# protoc comes from Debian's protobuf-compiler package; the two Go code generators are built
# from the module proxy at fixed versions (protoc-gen-go at the protobuf version go.mod holds),
# so the generated files change only when the .proto or those versions do.
set -euo pipefail
cd "$(dirname "$0")/.."
GRPC_GEN_VERSION=v1.6.2
if ! command -v protoc >/dev/null; then
  apt-get install -y protobuf-compiler >/dev/null
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
GOBIN=$bin go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$GRPC_GEN_VERSION"
root=sinks/plugin/proto
PATH="$bin:$PATH" protoc -I "$root" \
  --go_out="$root" --go_opt=paths=source_relative \
  --go-grpc_out="$root" --go-grpc_opt=paths=source_relative \
  "$root/sluice/plugin/v1/plugin.proto"
