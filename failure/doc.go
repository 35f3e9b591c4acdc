// Package failure holds the one mark of a failure that retrying cannot fix, and the name of
// every kind of such failure (types.go). Code that knows a failure is permanent marks it where
// it happens (a sink refusing a value, a source missing a table, a commit finding another
// source's position); package activities turns a marked error into a non-retryable Temporal
// error of the mark's type in one place, and the workflows match on the type names. The
// package imports nothing of Temporal, so every layer below the activities can mark.
package failure
