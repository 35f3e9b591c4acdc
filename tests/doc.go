// Package tests holds Sluice's end-to-end suites: smoke tests proving the service harness, and
// (as the pipeline grows) the delivery-guarantee and fault-injection suites that run pipelines
// against real PostgreSQL, Temporal, ClickHouse, gocaves and S3-compatible storage.
//
// The tests run in parallel (make test runs four at a time; one, which says why, runs alone first). The test binary
// starts parallel tests in the order of its files' names, so the longest ones, at the scale of
// the budgets' acceptance, live in files named at_scale_*: started first, they do not finish
// alone at the end of the run.
package tests
