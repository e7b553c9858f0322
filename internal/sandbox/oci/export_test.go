package oci

// For the benchmarks' bare-runtime reference (floor_test.go): a Sandbox's
// own init, its environment and runsc's flags, without the backend.
var (
	InitArgs      = initArgs
	InitEnv       = initEnv
	InitPath      = initPath
	OCIVersion    = ociVersion
	RuntimeHelper = runtimeHelper
	RunscFlags    = runscFlags
)

// RunscShared is the --shared-root of the backends with the default
// HostDir: its pinned network namespace outlives a test's directories.
func RunscShared() string { return (&OCI{opts: Options{HostDir: DefaultHostDir}}).runscSharedDir() }

// NeedsHiddenV2 says whether crun must run through RuntimeHelper here.
func NeedsHiddenV2() bool {
	l, err := detectCgroups()
	return err == nil && l.needsHiddenUnified()
}
