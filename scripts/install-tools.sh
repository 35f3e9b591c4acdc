#!/usr/bin/env bash
# install-tools.sh installs, once per machine, what Sluice's demo and tests need and Go cannot fetch
# as a module dependency: Debian's PostgreSQL 15, ClickHouse and Prometheus (for promtool, which
# tests the alert rules) packages, the Temporal CLI (which
# embeds the dev server and Web UI), gocaves (Couchbase's mock server) and SeaweedFS's weed (S3 and an
# Iceberg REST catalog). Built binaries are cached
# in $SLUICE_CACHE (default ~/.cache/sluice), outside the clone, so later runs take seconds.
#
# Usage: scripts/install-tools.sh [all|debian|temporal|gocaves|weed]
set -euo pipefail

CACHE="${SLUICE_CACHE:-$HOME/.cache/sluice}"
BIN="$CACHE/bin"
TEMPORAL_VERSION="v1.5.1"
GOCAVES_VERSION="v0.0.1-75"
GOCAVES_CLIENT="github.com/couchbaselabs/gocaves/client@v0.0.0-20250107114554-f96479220ae8"
SEAWEEDFS_VERSION="v0.0.0-20261109003541-7506e5f91cd6"
ROOT="$(cd "$(dirname "$0")/.." && pwd -P)"
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
  # (testkit/testenv.NewChDB installs chdb itself into $SLUICE_CACHE).
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
  # The version file names the build too: gocaves is built with a main of ours
  # (scripts/gocaves/main.go says why), and a binary built otherwise is built again.
  local version="$GOCAVES_VERSION quiet-main-1"
  if [ -x "$BIN/gocaves" ] && [ "$(cat "$BIN/gocaves.version" 2>/dev/null)" = "$version" ]; then
    return 0
  fi
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
    sed '/^\/\/go:build ignore$/d' "$ROOT/scripts/gocaves/main.go" > main.go
    go mod tidy
    GOFLAGS=-buildvcs=false go build -o "$BIN/gocaves.tmp" .
  )
  mv "$BIN/gocaves.tmp" "$BIN/gocaves"
  echo "$version" > "$BIN/gocaves.version"
}

install_weed() {
  if [ -x "$BIN/weed" ] && [ "$(cat "$BIN/weed.version" 2>/dev/null)" = "$SEAWEEDFS_VERSION" ]; then
    return 0
  fi
  log "building SeaweedFS weed $SEAWEEDFS_VERSION into $BIN (about 6 minutes, once per machine)"
  # `go install` refuses a module whose go.mod has a replace directive, and seaweedfs needs its
  # one (go-bip39, deleted from GitHub, comes from a fork): build it as the dependency of a
  # scratch module that copies the replace and seaweedfs' go.sum.
  local dir src
  dir="$(go mod download -json "github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
  [ -n "$dir" ] || { log "weed: module download failed"; return 1; }
  src="$CACHE/src/weed"
  rm -rf "$src"; mkdir -p "$src"
  cp "$dir/go.sum" "$src/go.sum"; chmod u+w "$src/go.sum"
  (
    cd "$src"
    printf 'module weedbuild\n\ngo %s\n\nrequire github.com/seaweedfs/seaweedfs %s\n' \
      "$(sed -n 's/^go //p' "$dir/go.mod")" "$SEAWEEDFS_VERSION" > go.mod
    grep '^replace ' "$dir/go.mod" | grep -v '=> /' >> go.mod
    GOFLAGS='-mod=mod -buildvcs=false' go build -o "$BIN/weed.tmp" github.com/seaweedfs/seaweedfs/weed
  )
  mv "$BIN/weed.tmp" "$BIN/weed"
  echo "$SEAWEEDFS_VERSION" > "$BIN/weed.version"
}

what="${1:-all}"
case "$what" in
  all) install_debian; install_gocaves; install_temporal; install_weed ;;
  debian) install_debian ;;
  temporal) install_temporal ;;
  gocaves) install_gocaves ;;
  weed) install_weed ;;
  *) log "unknown target $what (want all, debian, temporal, gocaves or weed)"; exit 2 ;;
esac
