// Package idleheap keeps the Go heap small in kndl's long-lived helpers in
// a Sandbox (its init, which runs the ports watcher and the transcript
// follower, or those commands themselves where init does not take them:
// internal/inithost), which wait beside Claude Code for the Session's
// whole life. They are the one kndl binary, whose package initialisation
// leaves a few MiB of garbage that the runtime would otherwise keep
// resident in each of them. Only those helpers import it.
package idleheap

import "runtime/debug"

// gcPercent is the helpers' GOGC. The runtime's least heap goal is 4 MB
// times GOGC/100: at the default 100 a helper's heap grows to 4 MB before
// its first collection whatever it keeps live (about 1 MB), and a helper
// that polls reaches it again; at 25 the goal is 1 MB or a quarter over
// what is live. Their bursts (a Turn's transcript lines) are small, so the
// extra collections cost little CPU.
const gcPercent = 25

// Trim sets the helper's GOGC and returns the heap's free pages, the
// package initialisation's garbage among them, to the system. A helper
// calls it once it has started.
func Trim() {
	debug.SetGCPercent(gcPercent)
	debug.FreeOSMemory()
}
