package runner

import (
	"slices"
	"testing"

	"kndl.dev/kndl/internal/build"
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

// TestARunnerTakingASessionBackKnowsItsUser: the user a Session's Claude
// Code runs as is kept in its directory, so a Runner that takes it back
// runs its check as that user too; a start as root forgets it.
func TestARunnerTakingASessionBackKnowsItsUser(t *testing.T) {
	dir := t.TempDir()
	u := build.User{Name: "dev", UID: 1500, GID: 1500, Home: "/home/dev"}
	if err := keepUser(dir, &u); err != nil {
		t.Fatal(err)
	}
	if got := keptUser(dir); got == nil || *got != u {
		t.Fatalf("kept %+v, want %+v", got, u)
	}
	if s := (&session{user: keptUser(dir)}); s.runAs() != "dev" {
		t.Errorf("runs as %q, want dev", s.runAs())
	}
	if err := keepUser(dir, nil); err != nil || keptUser(dir) != nil || (&session{}).runAs() != "" {
		t.Errorf("a start as root: %v, kept %+v; want none, root", err, keptUser(dir))
	}
}
