// Package tests holds Sluice's end-to-end suites: smoke tests proving the service harness, and
// (as the pipeline grows) the delivery-guarantee and fault-injection suites that run pipelines
// against real PostgreSQL, Temporal, ClickHouse, gocaves and S3-compatible storage.
//
// The tests run in parallel (make test runs four at a time; one, which says why, runs alone
// first). The longest ones, at the scale of the budgets' acceptance, live in files named
// at_scale_*. The order in which the test binary releases parallel tests is the runtime's, not
// the files' (a make test run started these two at about 420 s of 1,370).
package tests
