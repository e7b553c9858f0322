package buildinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestTheScriptsValuesWinOverGosStamps: a build's -ldflags values name
// it; without them, Go's stamps do; without either, nothing is made up.
func TestTheScriptsValuesWinOverGosStamps(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261205101126-1ec988fdf341"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "1ec988fdf34170a2c1d388fb3b2d96e15d771b07"}, {Key: "vcs.time", Value: "2026-12-05T10:11:26Z"}, {Key: "vcs.modified", Value: "true"}}}
	bare := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	date := time.Date(2026, 12, 5, 10, 11, 26, 0, time.UTC)
	tests := []struct {
		name                            string
		bi                              *debug.BuildInfo
		version, commit, date, modified string
		want                            Info
	}{
		{"the script's", stamped, "v1.2.0", "abc", "2026-12-06T00:00:00Z", "false",
			Info{Version: "v1.2.0", Commit: "abc", Date: date.Add(13*time.Hour + 48*time.Minute + 34*time.Second), GoVersion: "go1.26.8"}},
		{"Go's stamps", stamped, "", "", "", "",
			Info{Version: "v0.0.0-20261205101126-1ec988fdf341", Commit: "1ec988fdf34170a2c1d388fb3b2d96e15d771b07", Date: date, Modified: true, GoVersion: "go1.26.8"}},
		{"a go install of a version, no commit", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, "", "", "", "",
			Info{Version: "v1.2.0", GoVersion: "go1.26.8"}},
		{"nothing", bare, "", "", "", "", Info{Version: "(devel)", GoVersion: "go1.26.8"}},
	}
	for _, tt := range tests {
		if got := From(tt.bi, tt.version, tt.commit, tt.date, tt.modified); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestBuildKndlSetsWhatReadReads: every variable scripts/build-kndl sets
// with -X is one of this package's, and Read reports each (-X on a name
// that does not exist is silently ignored, so a rename would otherwise
// leave releases nameless). A small program stands for kndl: building
// kndl itself the script's way takes minutes.
func TestBuildKndlSetsWhatReadReads(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "scripts", "build-kndl"))
	if err != nil {
		t.Fatal(err)
	}
	set := regexp.MustCompile(`-X \$pkg\.(\w+)=`).FindAllStringSubmatch(string(script), -1)
	values := map[string]string{"version": "v9.9.9", "commit": "0123456789abcdef", "date": "2026-12-05T10:11:26Z", "modified": "true"}
	var flags []string
	for _, m := range set {
		v, ok := values[m[1]]
		if !ok {
			t.Fatalf("scripts/build-kndl sets %s, which the test does not know: add it to its values", m[1])
		}
		flags = append(flags, "-X kndl.dev/kndl/internal/buildinfo."+m[1]+"="+v)
	}
	if len(flags) != len(values) {
		t.Fatalf("scripts/build-kndl sets %d variables, want %d (%v)", len(flags), len(values), values)
	}
	bin := filepath.Join(t.TempDir(), "printinfo")
	cmd := exec.Command("go", "build", "-ldflags", strings.Join(flags, " "), "-o", bin, "./testdata/printinfo")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := Info{Version: "v9.9.9", Commit: "0123456789abcdef", Date: time.Date(2026, 12, 5, 10, 11, 26, 0, time.UTC), Modified: true, GoVersion: got.GoVersion}
	if got != want || got.GoVersion == "" {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
