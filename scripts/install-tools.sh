#!/usr/bin/env bash
# install-tools.sh installs, once per machine, what Sluice's demo and tests need and Go cannot fetch
# as a module dependency: Debian's PostgreSQL 15, ClickHouse and Prometheus (for promtool, which
# tests the alert rules) packages, the Temporal CLI (which
# embeds the dev server and Web UI) and gocaves (Couchbase's mock server). Built binaries are cached
# in $SLUICE_CACHE (default ~/.cache/sluice), outside the clone, so later runs take seconds.
#
# Usage: scripts/install-tools.sh [all|debian|temporal|gocaves]
set -euo pipefail

CACHE="${SLUICE_CACHE:-$HOME/.cache/sluice}"
BIN="$CACHE/bin"
TEMPORAL_VERSION="v1.5.1"
GOCAVES_VERSION="v0.0.1-75"
GOCAVES_CLIENT="github.com/couchbaselabs/gocaves/client@v0.0.0-20250107114554-f96479220ae8"
mkdir -p "$BIN"

log() { printf 'install-tools: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    log "need root to run: $*"; return 1; fi
}

install_debian() {
  local missing=()
  [ -x /usr/lib/postgresql/15/bin/postgres ] || missing+=(postgresql-15 postgresql-client-15)
  # PostGIS, for the tests of every type (citext, hstore and ltree come with postgresql-15).
  [ -f /usr/share/postgresql/15/extension/postgis.control ] || missing+=(postgresql-15-postgis-3)
  command -v clickhouse-server >/dev/null || missing+=(clickhouse-server clickhouse-client)
  # promtool, for tests/deploy_metrics_test.go (`promtool check rules`, `promtool test rules`).
  command -v promtool >/dev/null || missing+=(prometheus)
  # Node.js and npm, for the ClickHouse engine of npm chdb that reads the Iceberg tables in tests
  # (internal/testenv.NewChDB installs chdb itself into $SLUICE_CACHE).
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts packaged servers on install when it can; Sluice runs its own private instances.
  as_root service clickhouse-server stop >/dev/null 2>&1 || true
  as_root service postgresql stop >/dev/null 2>&1 || true
  as_root service prometheus stop >/dev/null 2>&1 || true
}

install_temporal() {
  # The CLI built from the module proxy reports 0.0.0-DEV, so a stamp file records the version.
  if [ -x "$BIN/temporal" ] && [ "$(cat "$BIN/temporal.version" 2>/dev/null)" = "$TEMPORAL_VERSION" ]; then
    return 0
  fi
  log "building the Temporal CLI $TEMPORAL_VERSION into $BIN (5-12 minutes, once per machine)"
  GOBIN="$BIN" GOFLAGS=-buildvcs=false go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_VERSION"
  echo "$TEMPORAL_VERSION" > "$BIN/temporal.version"
}

install_gocaves() {
  [ -x "$BIN/gocaves" ] && return 0
  log "building gocaves $GOCAVES_VERSION into $BIN (about a minute, once per machine)"
  local dir src
  dir="$(go mod download -json "github.com/couchbaselabs/gocaves@$GOCAVES_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
  [ -n "$dir" ] || { log "gocaves: module download failed"; return 1; }
  src="$CACHE/src/gocaves"
  rm -rf "$src"; mkdir -p "$src"
  cp -r "$dir"/. "$src"; chmod -R u+w "$src"
  (
    cd "$src"
    go mod edit -dropreplace=github.com/couchbaselabs/gocaves/client
    GOFLAGS=-mod=mod go get "$GOCAVES_CLIENT"
    go run ./tools/prebuildstep.go
    go mod tidy
    GOFLAGS=-buildvcs=false go build -o "$BIN/gocaves.tmp" .
  )
  mv "$BIN/gocaves.tmp" "$BIN/gocaves"
}

what="${1:-all}"
case "$what" in
  all) install_debian; install_gocaves; install_temporal ;;
  debian) install_debian ;;
  temporal) install_temporal ;;
  gocaves) install_gocaves ;;
  *) log "unknown target $what (want all, debian, temporal or gocaves)"; exit 2 ;;
esac
