#!/usr/bin/env bash
# screenshot-webui.sh takes the Temporal Web UI screenshot of docs/operations.md: it installs
# headless Chromium (Debian's chromium package) when missing, then runs cmd/webuishot, which
# starts a pipeline on the devstack services and captures a TableWorkflow's page.
#
# Usage: scripts/screenshot-webui.sh [-out docs/webui-table-workflow.png]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null; then
  echo "screenshot-webui: installing Debian's chromium" >&2
  if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
scripts/install-tools.sh debian
scripts/install-tools.sh temporal
go run ./cmd/devstack start postgres temporal
go run ./cmd/webuishot "$@"
