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
		"apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-unsafe-io tmux docker.io docker-compose ca-certificates",
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

// TestAFeaturesContainerEnvIsSetAsDockerSetsENV: a Feature's containerEnv
// is set over the environment so far in the file's order, each value's
// $NAME, ${NAME}, ${NAME:-word} and ${NAME:+word} read as Docker reads an
// ENV instruction's; a name or value that is no variable's is refused,
// naming it.
func TestAFeaturesContainerEnvIsSetAsDockerSetsENV(t *testing.T) {
	image := []string{"PATH=/usr/bin:/bin", "LANG=C"}
	tests := []struct {
		name, meta string
		env        []string
		want       []string
		err        string
	}{
		{"none", `{"id": "x"}`, image, image, ""},
		{"in the file's order, over the image's", `{
			// comments and trailing commas, as the Features' own files have
			"id": "go",
			"containerEnv": {"GOROOT": "/usr/local/go", "PATH": "${GOROOT}/bin:$PATH", "LANG": "C.UTF-8",},
		}`, image, []string{"GOROOT=/usr/local/go", "PATH=/usr/local/go/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, ""},
		{"defaults and alternatives", `{"id": "x", "containerEnv": {"A": "${UNSET:-fallback}", "B": "${LANG:+set}", "C": "${UNSET:+set}", "D": "${LANG:-other}"}}`,
			image, append(slices.Clone(image), "A=fallback", "B=set", "C=", "D=C"), ""},
		{"no PATH in the image: the default", `{"id": "x", "containerEnv": {"PATH": "/opt/x/bin:${PATH}"}}`, nil,
			[]string{"PATH=/opt/x/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ""},
		{"a bad name", `{"id": "x", "containerEnv": {"1X": "y"}}`, image, nil, `containerEnv names "1X", not a variable`},
		{"a value not a string", `{"id": "x", "containerEnv": {"X": 1}}`, image, nil, "containerEnv.X is not a string"},
		{"containerEnv not an object", `{"id": "x", "containerEnv": ["X=1"]}`, image, nil, "containerEnv is not an object"},
		{"not JSON", `{"id": `, image, nil, "not JSON with comments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := containerEnv([]byte(tt.meta), tt.env)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, %v; want an error saying %q", got, err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestTheLoginPathKeepsWhatItStartedFrom: a login shell that sets PATH
// anew (Debian's /etc/profile) keeps the entries the image or a Feature
// added, each where it stood against the entries both have; what the
// shell added itself stays first.
func TestTheLoginPathKeepsWhatItStartedFrom(t *testing.T) {
	const debian = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	tests := []struct{ login, from, want string }{
		{debian, debian, debian},
		{debian, "/usr/local/go/bin:/go/bin:" + debian, "/usr/local/go/bin:/go/bin:" + debian},
		{debian, "/opt/tool/bin:/usr/sbin:/usr/bin:/sbin:/bin", "/opt/tool/bin:" + debian},
		{debian, "/usr/bin:/opt/late/bin:/bin", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/opt/late/bin:/sbin:/bin"},
		{"/root/.bashrc/bin:" + debian, debian, "/root/.bashrc/bin:" + debian},
	}
	for _, tt := range tests {
		if got := keepPath(tt.login, tt.from); got != tt.want {
			t.Errorf("keepPath(%q, %q) = %q, want %q", tt.login, tt.from, got, tt.want)
		}
	}
}
