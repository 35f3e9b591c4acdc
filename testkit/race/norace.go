//go:build !race

package race

// Enabled is true in a build with -race.
const Enabled = false
