#!/usr/bin/env bash
# test.sh runs every test of the module the way `make test` does, against the services
# cmd/devstack started (make test starts them first).
#
# The end-to-end tests of ./tests mostly wait on the services and the workers they start, so
# they run first, E2E_PARALLEL at a time. Beside them, at the lowest CPU priority (nice 19), run
# the unit packages whose tests use no shared service (their test binaries import neither
# testkit/testenv nor testkit/devstack): they take only CPU the end-to-end tests leave idle.
# The unit packages that use the services, and workflows (see classify), run after ./tests:
# beside them, the services would serve them at full priority, whatever their own nice, and the
# end-to-end tests' waits time out. Their test binaries are built beside ./tests, at idle
# priority (SCHED_IDLE).
# Every unit package runs with the race detector (but for three volume tests of sinks/clickhouse
# and source, see below); then the packages whose code differs with the faults tag run again
# with it (in the low-priority group too). All groups must pass.
#
# E2E_PARALLEL is the end-to-end tests' -parallel, and the number of lanes they share (an
# at-scale test or a workload test takes several: tests/lanes_test.go says how many, and why).
#
# Environment (the Makefile passes its own): GO (go), TEST_TIMEOUT (45m), E2E_PARALLEL (7),
# FAULTS_TAG (faults), FAULTS_PKGS (./internal/faults/ ./worker/), GOTESTFLAGS (extra test flags
# for every step, such as -json to measure durations, -v or -run X; the test binaries this script
# runs itself get them as -test.v, -test.run X).
set -uo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
TIMEOUT="${TEST_TIMEOUT:-45m}"
E2E_PARALLEL="${E2E_PARALLEL:-7}"
read -r -a EXTRA <<< "${GOTESTFLAGS:-}"
FAULTS_TAG="${FAULTS_TAG:-faults}"
read -r -a FAULTS_PKGS <<< "${FAULTS_PKGS:-./internal/faults/ ./worker/}"
MODULE="$($GO list -m)" || exit 1
# The flags for test binaries that this script runs itself (the packages with services): -json
# runs them under test2json, as go test -json does (-test.v=test2json, with or without -v);
# -v prints their output even when they pass; every other flag is passed on with the binary's
# -test. prefix (-run X, -short, ...).
json=0
verbose=0
binflags=()
for f in "${EXTRA[@]}"; do
  case "$f" in
    -json | --json) json=1 ;;
    -v | --v | -v=true) verbose=1 ;;
    -*) binflags+=("-test.${f#"${f%%[!-]*}"}") ;;
    *) binflags+=("$f") ;;
  esac
done
# Every test binary (some forty per run, most of them race-built) and every worker the
# end-to-end tests build is linked without DWARF debug information (-w): nothing here runs under a
# debugger, and panics, race reports and profiles symbolize from the symbol table and pclntab,
# which stay, and linking without it takes less CPU. It is appended to GOFLAGS, so that the go
# builds the tests run inherit it; a build that passes -ldflags of its own (make build) keeps its
# own.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-ldflags=-w"

# run_test BINDIR PKG [FLAGS...] runs the test binary of PKG that go test -c wrote to BINDIR in
# the package's directory, with go test's flags for it, and prints what go test would: the
# test2json events with -json; otherwise the output only when it failed (or with -v), then an
# "ok" or "FAIL" line with the package and its time.
run_test() {
  local bindir=$1 pkg=$2
  shift 2
  local importpath dir bin log began rc
  read -r importpath dir < <("$GO" list -f '{{.ImportPath}} {{.Dir}}' "$pkg") || return 1
  bin="$bindir/${importpath##*/}.test"
  if [ "$json" -eq 1 ]; then
    (cd "$dir" && "$GO" tool test2json -t -p "$importpath" "$bin" -test.v=test2json -test.paniconexit0 \
      -test.count=1 -test.timeout="$TIMEOUT" "$@" "${binflags[@]}")
    return
  fi
  local v=()
  [ "$verbose" -eq 1 ] && v=(-test.v)
  log="$out/${importpath//\//_}.log"
  began=$EPOCHREALTIME
  (cd "$dir" && "$bin" -test.paniconexit0 -test.count=1 -test.timeout="$TIMEOUT" "${v[@]}" "$@" \
    "${binflags[@]}") > "$log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] || [ "$verbose" -eq 1 ]; then
    cat "$log"
  fi
  printf '%s\t%s\t%ss\n' "$([ "$rc" -eq 0 ] && echo ok || echo FAIL)" "$importpath" \
    "$(awk -v a="$began" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')"
  return "$rc"
}

# run_each N BINDIR [FLAGS...] -- PKG... runs the packages' test binaries (run_test), N at a time
# in the order given, each printing its output when it ends; it fails when one of them failed.
# Run it in a subshell: it counts and waits for the shell's background jobs as its own.
run_each() {
  local n=$1 bindir=$2
  shift 2
  local flags=()
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  local i=0 pkg rc=0 run="$out/run.${bindir##*/}"
  for pkg in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$n" ]; do wait -n; done
    (
      run_test "$bindir" "$pkg" "${flags[@]}" > "$run.$i.log" 2>&1
      echo $? > "$run.$i.rc"
      flock "$out/print.lock" cat "$run.$i.log"
    ) &
    i=$((i + 1))
  done
  wait
  for ((i = 0; i < $#; i++)); do
    [ "$(cat "$run.$i.rc" 2>/dev/null)" = 0 ] || rc=1
  done
  return "$rc"
}

# Every package with its test binary's dependencies: "pkg SERVICES" for those whose tests use a
# shared service, "pkg" for the others. testkit/devstack starts services of its own. workflows
# runs after ./tests too: its test environment times activity heartbeats (10 s) on the wall
# clock, and at nice 19 beside ./tests its race-built activities missed them (a make test run).
classify() {
  $GO list -test -f '{{if and (eq .Name "main") (not .ForTest)}}{{.ImportPath}}{{range .Deps}}{{if or (eq . "'"$MODULE"'/testkit/testenv") (eq . "'"$MODULE"'/testkit/devstack")}} SERVICES{{end}}{{end}}{{"\n"}}{{end}}' ./... |
    awk -v mod="$MODULE" '
      $1 !~ /\.test$/ { next }
      { pkg = $1; sub(/\.test$/, "", pkg) }
      pkg == mod "/tests" { next }
      NF > 1 || pkg == mod "/testkit/devstack" || pkg == mod "/workflows" { print "services " pkg; next }
      { print "local " pkg }'
}
groups="$(classify)" || { echo "test.sh: listing the packages failed" >&2; exit 1; }
mapfile -t local_pkgs < <(awk '$1 == "local" { print $2 }' <<< "$groups")
# The packages with services run two at a time (go test -p is the number of cores), in the order
# given: the longest first (each of the others is short), so that none of them runs alone at the
# end.
slow_first=(sinks/clickhouse sinks/iceberg workflows sinks/couchbase source)
mapfile -t service_pkgs < <(awk -v mod="$MODULE" -v slow="${slow_first[*]}" '
  BEGIN { n = split(slow, s, " "); for (i = 1; i <= n; i++) rank[mod "/" s[i]] = i }
  $1 == "services" { print ($2 in rank ? rank[$2] : n + 1), $2 }' <<< "$groups" | sort -n -s -k1,1 | cut -d' ' -f2)
if [ ${#local_pkgs[@]} -eq 0 ] || [ ${#service_pkgs[@]} -eq 0 ]; then
  echo "test.sh: no package in one of the groups (local: ${#local_pkgs[@]}, services: ${#service_pkgs[@]})" >&2
  exit 1
fi

out="$(mktemp -d)"
# A test binary killed by its timeout leaves its temporary directories behind; in a tmpfs TMPDIR
# (scripts/test-dirs.sh) they would hold memory until reboot. Those this run created (go test's
# Test*, the tests' sluice-* binaries; not make test's own stack) are removed on the way out.
touch "$out/began"
cleanup() {
  if [ -n "${TMPDIR:-}" ] && [ "$(stat -f -c %T "$TMPDIR" 2>/dev/null)" = tmpfs ]; then
    find "$TMPDIR" -mindepth 1 -maxdepth 1 -user "$(id -u)" -newer "$out/began" \
      \( -name 'Test*' -o -name 'sluice-*' \) ! -name 'sluice-test-*' -exec rm -rf {} + 2>/dev/null
  fi
  rm -rf "$out"
}
trap cleanup EXIT

# Services the tests' Ensure found dead or unanswering are restarted under every test using them;
# devstack records why in the stack's events.log, printed at the end when this run added to it.
events="${SLUICE_STACK_DIR:-.stack}/events.log"
events_before=$(stat -c %s "$events" 2>/dev/null || echo 0)

# Three tests exist for their volume: two of ClickHouse (a 1.25-million-row batch that must stay
# one part, five 200,000-row inserts killed midway) and one of the source (a 1,000,000-row
# transaction decoded within a bounded heap). Under the race detector they take several times
# the CPU they take without (the detector's work on every access), in the phase of make test
# where the CPU is the limit. They run without it, beside the others, each
# package in a test binary of its own (so the source's heap is measured in a process where it
# runs alone); the code they drive is raced by their packages' other tests at small sizes.
norace_pkgs=(./sinks/clickhouse/ ./source/)
norace_tests='^(TestLargeBatchIsOnePart|TestCrashMidInsertIsAtomic|TestLargeTransactionMemoryBounded)$'

# The test binaries of the packages with services are built (go test -c) while ./tests runs, and
# run after it: linking them takes CPU the end-to-end tests leave idle (their last minutes run
# fewer tests than lanes and wait more), where after ./tests it held up the packages' start. The
# build runs under SCHED_IDLE (chrt --idle), which gets a core only when nothing else wants it:
# at nice 19 alone it took a share of the busy cores too, and delayed ./tests by as much as it
# saved the packages.
bins="$out/bin"
idle=(nice -n 19)
if chrt --idle 0 true 2>/dev/null; then
  idle=(chrt --idle 0 nice -n 19)
fi
(
  "${idle[@]}" "$GO" test -c -race -o "$bins/race/" "${service_pkgs[@]}" &&
    "${idle[@]}" "$GO" test -c -o "$bins/norace/" "${norace_pkgs[@]}"
) > "$out/build.log" 2>&1 &
build_pid=$!

# The unit packages without services, then the faults-tag step, at nice 19; their output is
# printed after ./tests' so that the two do not interleave.
(
  nice -n 19 "$GO" test -count=1 -race -timeout "$TIMEOUT" "${EXTRA[@]}" "${local_pkgs[@]}"
  rc=$?
  nice -n 19 "$GO" test -count=1 -short -race -tags "$FAULTS_TAG" -timeout "$TIMEOUT" "${EXTRA[@]}" "${FAULTS_PKGS[@]}"
  rc2=$?
  echo "$rc $rc2" > "$out/rc"
) > "$out/local.log" 2>&1 &
local_pid=$!

"$GO" test -count=1 -timeout "$TIMEOUT" -parallel "$E2E_PARALLEL" "${EXTRA[@]}" ./tests/
e2e=$?
wait "$local_pid"
cat "$out/local.log"
read -r units faults < "$out/rc" || { units=1; faults=1; }

# The packages with services, two at a time (as go test -p would on these two cores) in the
# order given, beside the volume tests without the race detector; each binary runs in its
# package's directory, as go test runs it, and prints its output when it ends.
wait "$build_pid"
built=$?
if [ "$built" -ne 0 ]; then
  cat "$out/build.log"
fi
services=1
norace=1
if [ "$built" -eq 0 ]; then
  (run_each 1 "$bins/norace" -test.run "$norace_tests" -- "${norace_pkgs[@]}") > "$out/norace.log" 2>&1 &
  norace_pid=$!
  (run_each 2 "$bins/race" -test.skip "$norace_tests" -- "${service_pkgs[@]}")
  services=$?
  wait "$norace_pid"
  norace=$?
  cat "$out/norace.log"
fi

if [ "$(stat -c %s "$events" 2>/dev/null || echo 0)" -gt "$events_before" ]; then
  echo "test.sh: services were restarted during the run ($events):"
  tail -c +"$((events_before + 1))" "$events"
fi

if [ "$e2e" -ne 0 ] || [ "$units" -ne 0 ] || [ "$faults" -ne 0 ] || [ "$services" -ne 0 ] || [ "$norace" -ne 0 ]; then
  echo "FAIL: ./tests exit $e2e, unit packages without services exit $units, faults tag exit $faults, unit packages with services exit $services, their volume tests without the race detector exit $norace"
  exit 1
fi
