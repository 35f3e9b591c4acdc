// Package devstack is Sluice's service manager for the demo, the tests and a developer at a
// shell. It starts real PostgreSQL, the Temporal dev server, ClickHouse and gocaves (Couchbase's
// mock server) on private ports under one work directory, records each service's pid and address
// in a state file, and stops what it started by pid. Starting is idempotent and serialized by a
// file lock, so parallel test binaries share one stack. Tools that must be installed or built
// first come from scripts/install-tools.sh; a missing tool is an error that says how to get it.
package devstack
