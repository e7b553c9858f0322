package runner

import (
	"fmt"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
)

// A Sandbox's disk limit (RUNNER_SANDBOX_MAX_DISK_MIB) is the backend's to
// enforce: a write past it fails inside the Sandbox with "No space left on
// device". The Runner says so in words: in the start log at each boot, and
// in a note after the tool call that filled it (or at the end of its
// Turn), once until it has room again.

// diskLine is the start log's line on a Sandbox's disk limit; "" without one.
func diskLine(st sandbox.Status) string {
	switch {
	case st.Resources.DiskMiB == 0:
		return ""
	case st.DiskFull:
		return diskFullNote(st)
	}
	return fmt.Sprintf("disk: %d of %d MiB used (the Runner's limit for a Sandbox, RUNNER_SANDBOX_MAX_DISK_MIB)", st.DiskUsedMiB, st.Resources.DiskMiB)
}

// diskFullNote tells a Session its Sandbox's disk is full.
func diskFullNote(st sandbox.Status) string {
	return fmt.Sprintf("This Sandbox's disk is full: it has used %d of its %d MiB (the Runner's limit, RUNNER_SANDBOX_MAX_DISK_MIB), "+
		"so writes fail with \"No space left on device\" until files are deleted, such as build outputs or caches.", st.DiskUsedMiB, st.Resources.DiskMiB)
}

// noteDiskFull holds the note for a Session whose Sandbox's disk has just
// been found full, after a tool call or at the end of a Turn, where a
// write that failed for it is fresh; it says nothing again until the disk
// has had room. A Status is a file read and a statfs, asked only of a
// Sandbox with a limit.
func (s *session) noteDiskFull() {
	if !s.diskLimited.Load() {
		return
	}
	st, err := s.backend.Status(s.life, s.sandbox)
	if err != nil || !st.DiskFull {
		s.diskFull.Store(false)
		return
	}
	if !s.diskFull.Swap(true) {
		s.stream.hold(protocol.Event{Kind: protocol.EventNote, Text: diskFullNote(st)})
	}
}
