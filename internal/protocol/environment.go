package protocol

import "kndl.dev/kndl/internal/egress"

// Environment messages. session.start carries the Environment a Session
// starts on; env.test asks a Runner for a Test build, whose log comes back
// in env.test_log notifications before the reply.
const (
	TypeEnvTest    = "env.test"
	TypeEnvTestLog = "env.test_log"
)

// Environment is what a Sandbox is built from and starts with: one version
// of its Repo's Environment. Zero fields are the Runner's defaults.
type Environment struct {
	Version   int    `json:"version"`
	Image     string `json:"image,omitempty"`
	Bootstrap string `json:"bootstrap,omitempty"`
	Start     string `json:"start,omitempty"`
	// Docker: the Build installs Docker and each Sandbox runs dockerd.
	Docker bool `json:"docker,omitempty"`
	// DependencyFolders and NextTo say which folders of /workspace go on
	// the Sandbox's dependency disk (environment.Config has the rule).
	DependencyFolders []string          `json:"dependency_folders,omitempty"`
	NextTo            map[string]string `json:"next_to,omitempty"`
	CPUs              float64           `json:"cpus,omitempty"`
	MemoryMiB         int               `json:"memory_mib,omitempty"`
	// Egress is what the Session's Sandbox reaches: the zero Policy is
	// open; an allowlist restricts it (internal/egress).
	Egress egress.Policy `json:"egress,omitzero"`
}

// EnvTest asks for a Test build of a draft: its Build, then its Start
// script on a fresh clone of the Repo, leaving no Sandbox or clone behind.
// Variables are those available at build; the reply is nil once it passed,
// an error saying why otherwise.
type EnvTest struct {
	TestID      string      `json:"test_id"`
	RepoURL     string      `json:"repo_url"`
	Environment Environment `json:"environment"`
	Variables   []Variable  `json:"variables,omitempty"`
	// CloneToken reads the Repo's contents alone (the App's, minted for
	// this Test build); empty without an App, for the host's credentials.
	CloneToken string `json:"clone_token,omitempty"`
}

// EnvTestLog is a Test build's next lines of log.
type EnvTestLog struct {
	TestID string   `json:"test_id"`
	Lines  []string `json:"lines"`
}
