//go:build race

package security

// raceEnabled: the race detector slows code unevenly, so timing is not
// measured under it.
const raceEnabled = true
