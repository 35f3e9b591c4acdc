// Package reader is the pipeline's change reader, the engine of the ReadStream activity: it
// streams the slot's changes (package source), buffers them per table and cuts batches (package
// batch), writes each batch to the staging store and signals its table, and tells the stream how
// far it may confirm the slot. The slot is never confirmed past a change that is buffered, or
// staged and not yet acknowledged by its table's commit (see held): that is what makes a crash
// at any point lose nothing.
//
// The package knows nothing of Temporal. Package activities runs Read as the ReadStream activity:
// it wires the staging store, the tables' signals and the heartbeat in, and gives the errors
// marked here (package failure: SourceSetup, PoisonBatch) their Temporal class.
package reader
