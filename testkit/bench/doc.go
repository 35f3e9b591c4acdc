// Package bench measures Sluice against the limits of the PostgreSQL it reads from, in the same
// run on the same machine: limit 1 is `COPY ... TO STDOUT (FORMAT binary)` to nowhere (what a
// backfill could at best read), limit 2 is pg_recvlogical with pgoutput decoding the same WAL a
// stream would (what a stream could at best consume). Sluice's figures are reported as ratios to
// these limits.
package bench
