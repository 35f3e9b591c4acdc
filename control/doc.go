// Package control is the Temporal client side of Sluice: it starts, signals and queries the
// workflows of package workflows. Tables starts a table's TableWorkflow, delivers its staged
// batches and carries the operator's pause, resume, resync and stop (with the rule of which
// stops only a resync undoes); the search-attribute functions register and check the attributes
// the workflows upsert; the static summaries are what the Web UI shows of a run it starts.
//
// The workflow code itself, and every Temporal name both sides use (task queue, workflow types
// and IDs, signals, queries, search attributes), live in package workflows (workflows/names.go):
// control imports workflows, never the other way.
package control
