//go:build race

// Package race tells whether the binary was built with the race detector, so that a test can
// size its workload to the detector's cost (5-10x the CPU, more memory) and still run it whole.
package race

// Enabled is true in a build with -race.
const Enabled = true
