package protocol

// TypeRunnerPool is what a Runner's warm pool holds now, sent on each
// change and once a connection is welcomed (since version 7).
const TypeRunnerPool = "runner.pool"

// RunnerPool is a Runner's warm pool: its Sandboxes ready (Claude Code at
// its prompt, bound to no Session) and the memory they and the fills under
// way count against its bound.
type RunnerPool struct {
	Ready     int `json:"ready"`
	MemoryMiB int `json:"memory_mib"`
}
