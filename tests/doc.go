// Package tests holds Sluice's end-to-end suites: smoke tests proving the service harness, and
// (as the pipeline grows) the delivery-guarantee and fault-injection suites that run pipelines
// against real PostgreSQL, Temporal, ClickHouse, gocaves and S3-compatible storage.
//
// The tests run in parallel: make test runs as many at once as the Makefile's E2E_PARALLEL
// (go test -parallel), an at-scale test with fewer beside it (the lanes of lanes_test.go); one,
// which says why, runs alone first. The longest ones, at the scale of the budgets' acceptance,
// live in files named at_scale_*. The order in which the test binary releases parallel tests
// is the runtime's, not the files': an at-scale test may start well into the run.
//
// Tests wait on conditions, each with a reason and a deadline (localrun.WaitFor and the helpers
// of wait_helpers_test.go), never on a bare sleep.
package tests
