package runner

import (
	"kndl.dev/kndl/internal/confine"
	"kndl.dev/kndl/internal/inithost"
	"kndl.dev/kndl/internal/sandbox/oci"
)

// RunHelper runs the helper args (os.Args) names, if it names one, and
// reports its exit code: the sandbox backend's and the Runner's confined
// tasks, each the same binary run again; hosted are the jobs a Sandbox's
// init runs (oci.RunHelper). cmd/kndl and every test binary that runs a
// Runner call it before anything else:
//
//	if code, ok := runner.RunHelper(os.Args, nil); ok {
//		os.Exit(code)
//	}
func RunHelper(args []string, hosted inithost.Jobs) (code int, ok bool) {
	if code, ok := oci.RunHelper(args, hosted); ok {
		return code, true
	}
	return confine.RunHelper(args, confine.Tasks{taskChanges: runChangesTask})
}
