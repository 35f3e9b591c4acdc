// Package faults is a testing hook for the fault-injection suites: it lets a test make a worker
// crash itself (SIGKILL, as the kernel's OOM killer or a power cut would, never a clean exit) at
// a named point of the commit path or as an activity of a given type starts (ActivityStart,
// through a worker interceptor of the worker binary), or break the commit path on purpose (a
// mutation) to prove the suites can fail.
//
// The fault points exist only in a build with the faults tag (go build -tags faults), which the
// end-to-end tests use for the workers they start (package tests, through localrun.Build). The
// product is built without it (make build, deploy/Dockerfile, cmd/demo, cmd/bench): there the
// Points methods are empty bodies the compiler inlines away, the arming code is not compiled in,
// and the worker ignores SLUICE_FAULTS, saying so at startup. A worker built with the tag and
// armed crashes deliberately and, with a mutation, loses data on purpose; it logs a warning at
// startup saying so. worker's TestProductionBuild checks both builds' binaries.
//
// In a build with the tag, the faults are read from one environment variable of the worker process, SLUICE_FAULTS: a
// comma-separated list of faults, each
//
//	POINT:kill[@N][:SCHEMA.TABLE]
//
// POINT is where the fault fires (see the Point constants), kill is the action (the only one),
// N (default 1) says on which pass of the point it fires, counting from 1 in this process, and
// SCHEMA.TABLE restricts it (and its count) to one source table. For example
//
//	SLUICE_FAULTS=commit.before-write:kill@3:public.items
//
// kills the worker just before its third sink write of public.items, and
//
//	SLUICE_FAULTS=activity.start:kill@2:LoadTable
//
// as it starts its second LoadTable activity (the argument is an activity type, not a table). A mutation point
// (commit.ack-before-write) breaks the path at its pass and then kills the process.
//
// The worker parses the variable once at startup (New, faults tag only) and hands the resulting
// *Points to the activities that have hook calls; a nil *Points is a no-op that costs one nil
// check per call.
// There is no package-level state: the pass counters live in the Points value.
package faults
