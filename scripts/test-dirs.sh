#!/usr/bin/env bash
# test-dirs.sh prints, for eval, where make test keeps its services and temporary files: in
# memory when the machine has a tmpfs with room, on disk otherwise.
#
# On disk, the kernel's writeback of what the tests write (Postgres' WAL, Temporal's sqlite
# database, staged batch files, Iceberg warehouses, worker binaries) took more CPU in a make test
# run than the workers themselves: on two cores that is time the tests wait for. On a tmpfs that
# work does not happen. So, when TEST_TMPFS (default /dev/shm) is a tmpfs with at least
# TEST_TMPFS_MIN_GIB (default 8) GiB free:
#   - the services run in a stack of make test's own, SLUICE_STACK_DIR=<tmpfs>/sluice-test-<id of
#     the clone>, apart from make demo's .stack (make stop stops both and frees the memory);
#   - TMPDIR is the tmpfs itself, for every test's directories (a short prefix: Postgres' socket
#     path, under a private stack in a test's directory, must stay within 107 bytes).
# A SLUICE_STACK_DIR or TMPDIR already set is kept. Without such a tmpfs it prints nothing and
# the tests use .stack and /tmp.
#
# Output: export lines. With --own-stack it prints only the name of make test's own stack
# directory, whether or not it exists or the tmpfs has room now (make stop and make status look
# there, and make stop removes it).
set -euo pipefail
cd "$(dirname "$0")/.."

tmpfs="${TEST_TMPFS:-/dev/shm}"
min_gib="${TEST_TMPFS_MIN_GIB:-8}"
stack="$tmpfs/sluice-test-$(pwd -P | cksum | cut -d' ' -f1)"
if [ "${1:-}" = --own-stack ]; then
  echo "$stack"
  exit 0
fi
[ -d "$tmpfs" ] && [ -w "$tmpfs" ] || exit 0
[ "$(stat -f -c %T "$tmpfs" 2>/dev/null)" = tmpfs ] || exit 0
free_kib="$(df -Pk "$tmpfs" | awk 'NR == 2 { print $4 }')"
[ -n "$free_kib" ] && [ "$free_kib" -ge $((min_gib * 1024 * 1024)) ] || exit 0

if [ -z "${SLUICE_STACK_DIR:-}" ]; then
  printf 'export SLUICE_STACK_DIR=%q\n' "$stack"
fi
if [ -z "${TMPDIR:-}" ]; then
  printf 'export TMPDIR=%q\n' "$tmpfs"
fi
