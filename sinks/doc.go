// Package sinks defines the one interface every destination implements (Iceberg, ClickHouse,
// Couchbase, plugins) and the one classification of their errors: transient failures are retried
// with backoff, poison failures stop the table until an operator fixes the cause and resumes.
// Each sink lives in its own subpackage.
package sinks
