package config

import (
	"regexp"
	"strings"

	"github.com/sluicecdc/sluice/batch"
)

// Name rules. Pipeline names end up in workflow IDs and, with - turned into _, in slot names.
var (
	pipelineRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	publicationRe = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	collectionRe  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_%-]*$`)
	catalogNameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]*$`)
)

// maxPipelineLen keeps the default slot name sluice_<pipeline> within Postgres' 63 bytes.
const maxPipelineLen = batch.MaxNameLen - len("sluice_")

// validPipeline reports whether name is a valid pipeline name.
func validPipeline(name string) bool {
	return pipelineRe.MatchString(name) && len(name) <= maxPipelineLen
}

// DefaultSlotName returns the default slot and publication name of a pipeline:
// sluice_<pipeline> with - turned into _, since slot names allow only [a-z0-9_].
func DefaultSlotName(pipeline string) string {
	return "sluice_" + strings.ReplaceAll(pipeline, "-", "_")
}

// DefaultTaskQueue returns the default task queue of a pipeline: sluice-<pipeline>. Every
// pipeline gets its own queue, so pipelines sharing a Temporal namespace never take each other's
// tasks (a worker serves only the pipeline its config names).
func DefaultTaskQueue(pipeline string) string {
	return "sluice-" + pipeline
}

// targetParts splits a destination name at its dots and checks every part with valid.
func targetParts(target string, valid func(string) bool) ([]string, bool) {
	parts := strings.Split(target, ".")
	for _, p := range parts {
		if !valid(p) {
			return nil, false
		}
	}
	return parts, true
}
