#!/usr/bin/env bash
# demo.sh runs Sluice's embedded default on this machine: it starts a private PostgreSQL and the
# Temporal dev server (cmd/devstack), then runs cmd/demo, which seeds a sample schema, runs a
# worker and a pipeline into a local Iceberg warehouse and shows the results.
set -euo pipefail
cd "$(dirname "$0")/.."
go run ./cmd/devstack start postgres temporal
go run ./cmd/demo "$@"
