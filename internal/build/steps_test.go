package build

import (
	"slices"
	"strings"
	"testing"
)

func TestLacks(t *testing.T) {
	tests := []struct {
		probe string
		want  []string
	}{
		{"/usr/bin/bash\n/usr/bin/git\ntmux 3.3a\n", nil},
		{"/bin/bash\n/usr/bin/git\ntmux 3.2\n", nil},
		{"/bin/bash\n/usr/bin/git\ntmux 3.1c\n", []string{"tmux"}},
		{"/bin/bash\ntmux next-3.4\n", []string{"git"}},
		{"/lib/ld-musl-x86_64.so.1\n", []string{"bash", "git", "tmux"}},
		{"", []string{"bash", "git", "tmux"}},
	}
	for _, tt := range tests {
		if got := lacks(tt.probe); !slices.Equal(got, tt.want) {
			t.Errorf("lacks(%q) = %v, want %v", tt.probe, got, tt.want)
		}
	}
}

func TestKeyChangesWithEveryInput(t *testing.T) {
	base := Spec{Repo: "r", ImageDigest: "sha256:a", Bootstrap: "echo hi", Env: []string{"A=1", "B=2"}}
	same := base
	same.Env = []string{"B=2", "A=1"}
	same.Repo = "other repo" // the Repo keeps Builds apart only for pruning
	if base.Key() != same.Key() {
		t.Fatal("the key depends on the order of Variables or the Repo")
	}
	// A Build made before Docker was an input keeps its key.
	if got, want := base.Key(), "cb6dec07f589afb4d37d2f98a3553820"; got != want {
		t.Errorf("key %s, want %s as main computed it before Docker", got, want)
	}
	for name, change := range map[string]func(*Spec){
		"image":     func(s *Spec) { s.ImageDigest = "sha256:b" },
		"bootstrap": func(s *Spec) { s.Bootstrap = "echo bye" },
		"value":     func(s *Spec) { s.Env = []string{"A=1", "B=3"} },
		"variable":  func(s *Spec) { s.Env = []string{"A=1"} },
		"boundary":  func(s *Spec) { s.Bootstrap, s.ImageDigest = "", "sha256:aecho hi" },
		"docker":    func(s *Spec) { s.Docker = true },
	} {
		s := base
		change(&s)
		if s.Key() == base.Key() {
			t.Errorf("changing the %s kept the key", name)
		}
	}
}

func TestLineWriterKeepsTail(t *testing.T) {
	var lines []string
	w := &lineWriter{emit: func(s string) { lines = append(lines, s) }}
	w.Write([]byte("one\r\ntw"))
	w.Write([]byte("o\nthree"))
	w.flush()
	if !slices.Equal(lines, []string{"one", "two", "three"}) {
		t.Fatalf("lines = %q", lines)
	}
	big := make([]byte, 3*tailBytes)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	w.Write(big)
	if got := w.tail.String(); len(got) != tailBytes || got != string(big[len(big)-tailBytes:]) {
		t.Fatalf("tail is %d bytes, want the last %d", len(got), tailBytes)
	}
}

// TestInstallScriptNamesDockerAsEachManagerDoes: Docker is docker.io to
// apt, moby-engine to Fedora's dnf, docker elsewhere, with each one's
// Compose; an image with no manager fails naming them all.
func TestInstallScriptNamesDockerAsEachManagerDoes(t *testing.T) {
	s := installScript([]string{"tmux", dockerPackage})
	for _, want := range []string{
		"apt-get install -y -q --no-install-recommends tmux docker.io docker-compose ca-certificates",
		"apk add --no-cache tmux docker docker-cli-compose\n",
		"dnf install -y tmux moby-engine docker-compose\n",
		"zypper -n install tmux docker docker-compose\n",
		"pacman -Sy --noconfirm tmux docker docker-compose\n",
		"no package manager kndl knows (apt-get, apk, dnf, microdnf, yum, zypper, pacman)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the install script lacks %q:\n%s", want, s)
		}
	}
}
