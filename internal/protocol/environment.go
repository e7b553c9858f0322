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
// of its Repo's Environment, its settings inline.
type Environment struct {
	Version int `json:"version"`
	EnvironmentSettings
}

// EnvironmentSettings is one version's settings of a Repo's Environment,
// declared once: the Hub checks them (environment.Config), the API shows
// and takes them (api.EnvironmentSettings) and the Runner applies them.
// Zero fields are the Runner's defaults.
type EnvironmentSettings struct {
	// Image is an OCI image reference (tag or digest); empty is the
	// Runner's RUNNER_DEFAULT_IMAGE.
	Image string `json:"image,omitempty"`
	// Bootstrap runs once per Build, as root, with the Variables available
	// at build; what it leaves is in every Sandbox of the Build.
	Bootstrap string `json:"bootstrap,omitempty"`
	// Start runs in /workspace in each new Sandbox, before Claude Code.
	Start string `json:"start,omitempty"`
	// Features are Dev Container Features (containers.dev) the Build
	// installs in this order, before the Bootstrap script: the Runner pulls
	// each by digest through its registry settings and runs its install.sh
	// as root with its options as variables.
	Features []Feature `json:"features,omitempty"`
	// Docker installs Docker in the Build and runs dockerd in each
	// Sandbox, its data on a disk of the Sandbox's own, before the Start
	// script. The Bootstrap script has no dockerd: the Build's own
	// Sandbox keeps the strict profile.
	Docker bool `json:"docker,omitempty"`
	// DependencyFolders go on each Sandbox's dependency disk, bound at
	// each boot: names or globs such as node_modules or .venv, matching a
	// folder's name at any depth of /workspace, or with slashes, such as
	// packages/*/target, its path from /workspace.
	DependencyFolders []string `json:"dependency_folders,omitempty"`
	// NextTo maps a file name or glob, such as package.json, to the
	// dependency folder beside it, such as node_modules: one is bound there
	// even before it exists, so the first install lands on the disk.
	NextTo map[string]string `json:"next_to,omitempty"`
	// CPUs and MemoryMiB are asked for each Sandbox; the Runner caps them.
	// Zero is the Runner's default.
	CPUs      float64 `json:"cpus,omitempty"`
	MemoryMiB int     `json:"memory_mib,omitempty"`
	// BranchPrefix starts the branches each Session may push, before the
	// Session's short id: kndl/ when empty, so a Session pushes to
	// kndl/<the first 8 characters of its id>/… (internal/gitrelay). Not
	// a build input: a change applies at each Session's next start or wake.
	BranchPrefix string `json:"branch_prefix,omitempty"`
	// Egress is what each Sandbox reaches: open (the zero Policy) or an
	// allowlist (internal/egress). Not a build input: a change applies
	// without a Test build, to each Session at its next start or wake;
	// an allowlist's hosts changed apply to an awake Session's Sandbox
	// under an allowlist at once (session.egress).
	Egress egress.Policy `json:"egress,omitzero"`
	// CheckCommand is a command, such as make test, the Hub has the Runner run
	// in each attempt's Sandbox after its Turn ends (session.check); its
	// exit code ranks the attempts. Not a build input.
	CheckCommand string `json:"check,omitempty"`
	// Ports are offered in each Session's view with their labels before
	// anything listens on them: a devcontainer.json's forwardPorts and
	// portsAttributes. Not a build input, and the Hub's alone: it labels
	// the Runner's list of listening ports with them and never sends them.
	Ports []OfferedPort `json:"ports,omitempty"`
	// ContainerEnv is a devcontainer.json's containerEnv, NAME=value,
	// its values resolved: set for the container's whole life, so in the
	// Build too, for the Features' install.sh and the Bootstrap script,
	// under the Variables available at build. A build input. (Sessions
	// get it as the Repo's Variables the file set.)
	ContainerEnv []string `json:"container_env,omitempty"`
	// User is whom Claude Code, its tmux and the check command run as in
	// each Sandbox: a devcontainer.json's remoteUser, else its
	// containerUser; a name or uid of the image's /etc/passwd, which the
	// Build checks. Empty is root, the Sandbox's own. A build input; a
	// Runner whose RUNNER_ENVIRONMENT_USER is off runs Claude Code as
	// root and says so in the start log.
	User string `json:"user,omitempty"`
}

// OfferedPort is a port an Environment offers in each Session's view, and
// its label, a person's words ("" for none).
type OfferedPort struct {
	Port  int    `json:"port"`
	Label string `json:"label,omitempty"`
}

// MaxFeatureLayer bounds a Feature's artifact, which both the Hub (for
// its metadata) and the Runner (to install it) pull.
const MaxFeatureLayer = 16 << 20

// Feature is one Dev Container Feature of an Environment.
type Feature struct {
	// Ref names its OCI artifact by digest: repository@sha256:….
	Ref string `json:"ref"`
	// Env holds its options as install.sh takes them, NAME=value.
	Env []string `json:"env,omitempty"`
}

// TypeSessionEgress (Hub -> Runner, request, since version 6) swaps the
// allowlist an awake Session's restricted Sandbox is judged by
// (SessionEgress), from its next connection and DNS query. A Sandbox that
// is open, or an open Egress, is refused (conflict): the switch changes
// the Sandbox's network rules, which are set as it boots.
const TypeSessionEgress = "session.egress"

// SessionEgress is an awake Session's new allowlist.
type SessionEgress struct {
	SessionID string        `json:"session_id"`
	Egress    egress.Policy `json:"egress"`
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
