package runner

import (
	"slices"
	"testing"

	"kndl.dev/kndl/internal/protocol"
)

// TestTheBuildGetsContainerEnvWithTheVariablesAtBuildOverIt: a
// devcontainer.json's containerEnv reaches the Build, a Variable available
// at build of the same name over it, once a name; a Variable not available
// at build does not.
func TestTheBuildGetsContainerEnvWithTheVariablesAtBuildOverIt(t *testing.T) {
	env := &protocol.Environment{EnvironmentSettings: protocol.EnvironmentSettings{ContainerEnv: []string{"A=file", "B=file=with=equals", "C=file"}}}
	vars := []protocol.Variable{{Name: "A", Value: "person's", AtBuild: true}, {Name: "C", Value: "session only"}, {Name: "D", Value: "d", AtBuild: true}}
	if got, want := buildEnv(env, vars), []string{"A=person's", "B=file=with=equals", "C=file", "D=d"}; !slices.Equal(got, want) {
		t.Errorf("the Build's environment %q, want %q", got, want)
	}
	if got := buildEnv(nil, vars); !slices.Equal(got, []string{"A=person's", "D=d"}) {
		t.Errorf("with no Environment: %q", got)
	}
}

// TestASessionWhoseEnvironmentNamesAUserIsNotPooled: a pool Sandbox's
// Claude Code runs as root, so a Session that runs it as another user
// starts cold.
func TestASessionWhoseEnvironmentNamesAUserIsNotPooled(t *testing.T) {
	req := protocol.SessionStart{Environment: &protocol.Environment{}}
	if !poolable(req, protocol.SessionCredentials{}) {
		t.Fatal("a plain Session is not poolable")
	}
	req.Environment.User = "vscode"
	if poolable(req, protocol.SessionCredentials{}) {
		t.Error("a Session whose Environment names a user is poolable")
	}
}
