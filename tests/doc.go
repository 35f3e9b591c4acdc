// Package tests holds Sluice's end-to-end suites: smoke tests proving the service harness, and
// (as the pipeline grows) the delivery-guarantee and fault-injection suites that run pipelines
// against real PostgreSQL, Temporal, ClickHouse, gocaves and S3-compatible storage.
package tests
