// Package config is the pipeline configuration: the one place where settings enter Sluice. The
// starter and the worker load a YAML (or JSON) file once, with SLUICE_* environment variables
// overriding single keys (secrets above all), into the typed Config; the same Config, encoded as
// JSON, is the input of the Temporal workflows, and decoding it applies the same strict rules.
//
// Every problem of a config is reported at once, each naming its key path (for example
// tables[2].metadata[0].from) and what to write instead. Unknown keys are errors, not ignored.
// Defaults are filled in by Validate, so a Config that passed Validate is complete.
//
// Configs hold secrets (the source DSN, sink passwords): print or log Redacted, never the Config
// itself; String and LogValue already redact.
package config
