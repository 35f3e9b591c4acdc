// Package positionstore holds the committed positions of plugin sinks that keep none of their
// own: a table in a Postgres database, one row per pipeline and target, written only after the
// plugin acknowledged the batch's Apply. Wrap puts the store in front of a plugin sink so the
// committer reads and advances positions as it does with every sink; when the plugin reports a
// position of its own, that one wins. docs/position.md gives the design and its failure analysis.
package positionstore
