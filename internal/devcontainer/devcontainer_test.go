package devcontainer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"kndl.dev/kndl/internal/devcontainer"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/ociimage"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testkit"
)

// fakeFetch serves Features' layers from memory by reference, each with
// a digest made of its name.
func fakeFetch(t testing.TB, metas map[string]string) devcontainer.Fetch {
	return func(ctx context.Context, ref string) (string, []byte, error) {
		meta, ok := metas[ref]
		if !ok {
			return "", nil, fmt.Errorf("no %s: %w", ref, errdefs.ErrNotFound)
		}
		return "sha256:" + strings.Repeat("0", 60) + fmt.Sprintf("%04d", len(ref)), testkit.FeatureLayer(t, meta, "#!/bin/sh\necho installed\n"), nil
	}
}

func TestReadMapsEachProperty(t *testing.T) {
	tests := []struct {
		name string
		file string
		want devcontainer.Draft
	}{
		{"image, with comments and trailing commas", `{
			// VS Code writes these
			"name": "app",
			"image": "mcr.microsoft.com/devcontainers/go:1", /* and these */
		}`, devcontainer.Draft{Config: environment.Config{Image: "mcr.microsoft.com/devcontainers/go:1"}}},
		{"create commands in order, each form", `{
			"postCreateCommand": {"b": "make deps", "a": ["go", "mod", "download"]},
			"onCreateCommand": "apt-get install -y jq",
			"updateContentCommand": ["npm", "ci", "it's"],
		}`, devcontainer.Draft{Config: environment.Config{Bootstrap: "# onCreateCommand, from devcontainer.json\nsh -c 'apt-get install -y jq'\n" +
			"# updateContentCommand, from devcontainer.json\nnpm ci 'it'\\''s'\n" +
			"# postCreateCommand, from devcontainer.json\npids=()\ngo mod download & pids+=($!) # a\nsh -c 'make deps' & pids+=($!) # b\nfor pid in \"${pids[@]}\"; do wait \"$pid\"; done\n"},
			Notes: []string{"onCreateCommand, updateContentCommand, postCreateCommand: run once per Build as root, without the Repo's files; a command that needs them belongs in postStartCommand"}}},
		{"start and attach commands to Start", `{"postAttachCommand": "echo attached", "postStartCommand": ["touch", "/tmp/started"]}`,
			devcontainer.Draft{Config: environment.Config{Start: "# postStartCommand, from devcontainer.json\ntouch /tmp/started\n# postAttachCommand, from devcontainer.json\nsh -c 'echo attached'\n"}}},
		{"containerEnv, then remoteEnv over it, resolved", `{
			"containerEnv": {"GOFLAGS": "-mod=mod", "TOOLS": "/opt/tools", "GONE": "x"},
			"remoteEnv": {"PATH2": "${containerEnv:TOOLS}/bin:${containerEnv:NOPE:/usr/bin}", "GOFLAGS": "-v", "WS": "${containerWorkspaceFolder}/x", "SHELLS": "${HOME}", "GONE": null}
		}`, devcontainer.Draft{Config: environment.Config{ContainerEnv: []string{"GOFLAGS=-mod=mod", "GONE=x", "TOOLS=/opt/tools"}},
			Variables: []devcontainer.Variable{{"GOFLAGS", "-v"}, {"PATH2", "/opt/tools/bin:/usr/bin"}, {"SHELLS", "${HOME}"}, {"TOOLS", "/opt/tools"}, {"WS", "/workspace/x"}}}},
		{"forwardPorts labelled by portsAttributes, once each", `{
			"forwardPorts": [3000, "localhost:5432", "db:5432", 3000],
			"portsAttributes": {"3000": {"label": "<b>Web</b> & \"docs\" ✓"}, "9000-9100": {"label": "range"}, "8080": {"label": "unused"}}
		}`, devcontainer.Draft{Config: environment.Config{Ports: []protocol.OfferedPort{{Port: 3000, Label: `<b>Web</b> & "docs" ✓`}, {Port: 5432}}},
			Notes: []string{`forwardPorts[2]: "db:5432" is another host's port; a Session offers its own alone`,
				`portsAttributes["8080", "9000-9100"]: not used; kndl labels the ports forwardPorts names, each by its number`}}},
		{"a long label is cut", `{"forwardPorts": [8000], "portsAttributes": {"8000": {"label": "` + strings.Repeat("é", environment.MaxPortLabel+5) + `"}}}`,
			devcontainer.Draft{Config: environment.Config{Ports: []protocol.OfferedPort{{Port: 8000, Label: strings.Repeat("é", environment.MaxPortLabel)}}},
				Notes: []string{`portsAttributes["8000"].label: cut to its first 80 characters`}}},
		{"remoteUser over containerUser", `{"containerUser": "root", "remoteUser": "vscode"}`, devcontainer.Draft{Config: environment.Config{User: "vscode"}}},
		{"containerUser alone", `{"containerUser": "node"}`, devcontainer.Draft{Config: environment.Config{User: "node"}}},
		{"root is the Sandbox's own", `{"remoteUser": "root", "containerUser": "node"}`, devcontainer.Draft{}},
		{"hostRequirements within the limits", `{"hostRequirements": {"cpus": 4, "memory": "8gb", "storage": "32gb"}}`,
			devcontainer.Draft{Config: environment.Config{CPUs: 4, MemoryMiB: 8192}, Notes: []string{"hostRequirements.storage: not used; a Sandbox's disk is the Runner's to size"}}},
		{"hostRequirements over the limits are capped", `{"hostRequirements": {"cpus": 512, "memory": "4tb", "gpu": true}}`,
			devcontainer.Draft{Config: environment.Config{CPUs: environment.MaxCPUs, MemoryMiB: environment.MaxMemoryMiB}, Notes: []string{
				"hostRequirements.cpus: 512 is over kndl's 64; asks for 64",
				"hostRequirements.memory: 4tb is over kndl's 1048576 MiB; asks for that",
				"hostRequirements.gpu: not used; Sandboxes have no GPU"}}},
		{"the host's properties are ignored with a note each", `{
			"runArgs": ["--net=host"], "mounts": ["source=/,target=/host,type=bind"], "privileged": true,
			"capAdd": ["SYS_ADMIN"], "securityOpt": ["seccomp=unconfined"], "init": true
		}`, devcontainer.Draft{Notes: []string{
			"runArgs: ignored; a Sandbox never takes it, its host decides",
			"mounts: ignored; a Sandbox never takes it, its host decides",
			"privileged: ignored; a Sandbox never takes it, its host decides",
			"capAdd: ignored; a Sandbox never takes it, its host decides",
			"securityOpt: ignored; a Sandbox never takes it, its host decides",
			"init: ignored; a Sandbox never takes it, its host decides"}}},
		{"unknown properties are notes", `{"customizations": {"vscode": {}}, "workspaceFolder": "/src", "$schema": "x"}`,
			devcontainer.Draft{Notes: []string{"customizations: not used by kndl", "workspaceFolder: not used by kndl"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := devcontainer.Read(context.Background(), []byte(tt.file), devcontainer.Sources{})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestReadRefusesWithTheProperty(t *testing.T) {
	features := fakeFetch(t, map[string]string{
		"ghcr.io/a/f/one:1": `{"id": "one", "dependsOn": {"ghcr.io/a/f/two:1": {}}}`,
		"ghcr.io/a/f/two:1": `{"id": "two", "dependsOn": {"ghcr.io/a/f/one:1": {}}}`,
		"ghcr.io/a/f/bad:1": `{"version": "1"}`,
		"ghcr.io/a/f/env:1": `{"id": "env", "containerEnv": {"OK": "x", "NOT-A-NAME": "y"}}`,
		"ghcr.io/a/f/num:1": `{"id": "num", "containerEnv": {"N": 1}}`,
		"ghcr.io/a/f/gob:1": `{"id": "gob", "containerEnv": {"GOBIN": "${GOPATH}/bin"}}`,
	})
	big := `{"postStartCommand": "` + strings.Repeat("x", environment.MaxScript) + `"}`
	var many []string
	for p := range environment.MaxPorts + 1 {
		many = append(many, strconv.Itoa(3000+p))
	}
	tests := []struct {
		name, file string
		class      error
		want       string // in the message
	}{
		{"a file over 1 MiB", `{"image": "` + strings.Repeat("a", devcontainer.MaxFile) + `"}`, errdefs.ErrTooLarge, "at most 1048576 (1 MiB)"},
		{"a syntax error", `{"image": "debian:12",, }`, errdefs.ErrInvalid, "not JSON with comments"},
		{"not an object", `["image"]`, errdefs.ErrInvalid, "not an object of properties"},
		{"a Dockerfile", `{"build": {"dockerfile": "Dockerfile"}}`, errdefs.ErrInvalid, "build: a Dockerfile is refused until kndl has a builder; name the image your CI builds"},
		{"the old dockerFile", `{"dockerFile": "Dockerfile"}`, errdefs.ErrInvalid, "dockerFile: a Dockerfile is refused"},
		{"Docker Compose", `{"dockerComposeFile": "compose.yml", "service": "app"}`, errdefs.ErrInvalid, "dockerComposeFile: Docker Compose is refused"},
		{"a bad image", `{"image": "Not An Image"}`, errdefs.ErrInvalid, `image "Not An Image" is not an image reference`},
		{"an image of the wrong type", `{"image": 12}`, errdefs.ErrInvalid, "image: 12 is not what the specification allows"},
		{"${localEnv} in containerEnv", `{"containerEnv": {"TOKEN": "${localEnv:GITHUB_TOKEN}"}}`, errdefs.ErrInvalid, `containerEnv["TOKEN"]: ${localEnv:GITHUB_TOKEN} is refused`},
		{"${localEnv} with a default in remoteEnv", `{"remoteEnv": {"H": "${localEnv:HOME:/root}"}}`, errdefs.ErrInvalid, `remoteEnv["H"]: ${localEnv:HOME:/root} is refused`},
		{"${localWorkspaceFolder}", `{"remoteEnv": {"W": "${localWorkspaceFolder}"}}`, errdefs.ErrInvalid, `remoteEnv["W"]: ${localWorkspaceFolder} is refused`},
		{"${containerEnv} set by nothing", `{"remoteEnv": {"P": "${containerEnv:NOPE}:/x"}}`, errdefs.ErrInvalid, `remoteEnv["P"]: ${containerEnv:NOPE} names a variable that neither the image, its Features' containerEnv nor containerEnv sets: write its value, or give a default`},
		{"${containerEnv} of a Feature's value that reads others", `{"features": {"ghcr.io/a/f/gob:1": {}}, "remoteEnv": {"G": "${containerEnv:GOBIN}"}}`, errdefs.ErrInvalid, `remoteEnv["G"]: ${containerEnv:GOBIN} is the Feature gob's containerEnv "${GOPATH}/bin", which reads other variables`},
		{"a bad variable name", `{"containerEnv": {"1X": "y"}}`, errdefs.ErrInvalid, `containerEnv["1X"]: a Variable's name`},
		{"a variable name over 128 bytes", `{"remoteEnv": {"` + strings.Repeat("N", 129) + `": "y"}}`, errdefs.ErrInvalid, "a Variable's name has letters, digits and _, not starting with a digit, and at most 128"},
		{"a value over a Variable's limit", `{"containerEnv": {"BIG": "` + strings.Repeat("v", environment.MaxVariableBytes+1) + `"}}`, errdefs.ErrInvalid, `containerEnv["BIG"]: the value is 65537 bytes; a Variable's is at most 65536`},
		{"a value with a terminal's escape", `{"containerEnv": {"ESC": "a\u001b[31mb"}}`, errdefs.ErrInvalid, `containerEnv["ESC"]: the value holds the control character U+001B at byte 1`},
		{"a value with a NUL", `{"remoteEnv": {"Z": "a\u0000"}}`, errdefs.ErrInvalid, `remoteEnv["Z"]: the value holds the control character U+0000`},
		{"a value made over the limit by ${containerEnv}", `{"containerEnv": {"A": "` + strings.Repeat("v", environment.MaxVariableBytes) + `"}, "remoteEnv": {"B": "${containerEnv:A}x"}}`, errdefs.ErrInvalid, `remoteEnv["B"]: the value is 65537 bytes`},
		{"a lifecycle command of the wrong shape", `{"onCreateCommand": 3}`, errdefs.ErrInvalid, "onCreateCommand: 3 is not a string, an array of strings or an object"},
		{"a parallel command of the wrong shape", `{"postCreateCommand": {"a": {"b": 1}}}`, errdefs.ErrInvalid, "postCreateCommand.a: "},
		{"an empty array", `{"postStartCommand": []}`, errdefs.ErrInvalid, "postStartCommand: an empty array is no command"},
		{"a lifecycle command over the Bootstrap's limit", `{"onCreateCommand": "` + strings.Repeat("x", environment.MaxScript) + `"}`, errdefs.ErrInvalid, "onCreateCommand: the Bootstrap script it makes"},
		{"a start command over the Start's limit", big, errdefs.ErrInvalid, "postStartCommand: the Start script it makes"},
		{"a bad port", `{"forwardPorts": [70000]}`, errdefs.ErrInvalid, "forwardPorts[0]: 70000 is not a port"},
		{"a port of the wrong type", `{"forwardPorts": [true]}`, errdefs.ErrInvalid, "forwardPorts[0]: true is not a port number or host:port"},
		{"too many ports", `{"forwardPorts": [` + strings.Join(many, ", ") + `]}`, errdefs.ErrInvalid, "forwardPorts: has over 32 ports"},
		{"a label with a terminal's escape", `{"forwardPorts": [3000], "portsAttributes": {"3000": {"label": "web\u001b[2J"}}}`, errdefs.ErrInvalid, `portsAttributes["3000"].label: "web\x1b[2J" has a control character`},
		{"a label with a new line", `{"forwardPorts": [3000], "portsAttributes": {"3000": {"label": "web\nadmin"}}}`, errdefs.ErrInvalid, `portsAttributes["3000"].label: "web\nadmin" has a control character`},
		{"a label that turns text around", `{"forwardPorts": [3000], "portsAttributes": {"3000": {"label": "web\u202egpj.exe"}}}`, errdefs.ErrInvalid, `portsAttributes["3000"].label: "web\u202egpj.exe" has a control character`},
		{"a label of the wrong type", `{"forwardPorts": [3000], "portsAttributes": {"3000": {"label": 1}}}`, errdefs.ErrInvalid, "portsAttributes: "},
		{"a bad user", `{"remoteUser": "a b"}`, errdefs.ErrInvalid, `remoteUser: "a b" is not a user name`},
		{"a bad memory size", `{"hostRequirements": {"memory": "lots"}}`, errdefs.ErrInvalid, "hostRequirements.memory: \"lots\" is not a size"},
		{"a local Feature", `{"features": {"./local-feature": {}}}`, errdefs.ErrInvalid, `features["./local-feature"]: a Feature in the Repo's files is not supported yet`},
		{"a tarball Feature", `{"features": {"https://x.test/f.tgz": {}}}`, errdefs.ErrInvalid, "a Feature from a tarball URL is not supported"},
		{"a Feature without its registry", `{"features": {"node": {}}}`, errdefs.ErrInvalid, `features["node"]: "node" is not a Feature's OCI reference with its registry`},
		{"a Feature reference that does not parse", `{"features": {"ghcr.io/A B/c": {}}}`, errdefs.ErrInvalid, `features["ghcr.io/A B/c"]: "ghcr.io/A B/c" is not a Feature's OCI reference`},
		{"a Feature not in its registry", `{"features": {"ghcr.io/a/f/none:1": {}}}`, errdefs.ErrNotFound, `features["ghcr.io/a/f/none:1"]: no ghcr.io/a/f/none:1`},
		{"a Feature without an id", `{"features": {"ghcr.io/a/f/bad:1": {}}}`, errdefs.ErrInvalid, `features["ghcr.io/a/f/bad:1"]: its devcontainer-feature.json is not a Feature's`},
		{"a Feature's containerEnv with a bad name", `{"features": {"ghcr.io/a/f/env:1": {}}}`, errdefs.ErrInvalid, `features["ghcr.io/a/f/env:1"] containerEnv["NOT-A-NAME"]: its devcontainer-feature.json sets no variable`},
		{"a Feature's containerEnv not a string", `{"features": {"ghcr.io/a/f/num:1": {}}}`, errdefs.ErrInvalid, `features["ghcr.io/a/f/num:1"] containerEnv["N"]: its devcontainer-feature.json sets no variable`},
		{"Features in a cycle", `{"features": {"ghcr.io/a/f/one:1": {}}}`, errdefs.ErrInvalid, "features: ghcr.io/a/f/one, ghcr.io/a/f/two depend on each other in a cycle"},
		{"a Feature's option of the wrong type", `{"features": {"ghcr.io/a/f/one:1": {"x": [1]}}}`, errdefs.ErrInvalid, `features["ghcr.io/a/f/one:1"].x: an option is a string or a boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := devcontainer.Read(context.Background(), []byte(tt.file), devcontainer.Sources{Feature: features})
			if !errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v (a draft %+v), want an error of class %v saying %q", err, d, tt.class, tt.want)
			}
			if !reflect.DeepEqual(d, devcontainer.Draft{}) {
				t.Errorf("got a draft %+v with the error, want none", d)
			}
		})
	}
}

func TestFeaturesInstallInTheSpecificationsOrder(t *testing.T) {
	fetch := fakeFetch(t, map[string]string{
		"ghcr.io/f/node:1":         `{"id": "node", "options": {"version": {"type": "string", "default": "lts"}, "nvm-install": {"type": "boolean", "default": true}}, "installsAfter": ["ghcr.io/f/common"]}`,
		"ghcr.io/f/common:2":       `{"id": "common", "options": {"user": {"type": "string", "default": "auto"}}}`,
		"ghcr.io/f/yarn:1":         `{"id": "yarn", "dependsOn": {"ghcr.io/f/node:1": {"version": "20"}}}`,
		"ghcr.io/f/aaa:1":          `{"id": "aaa", "installsAfter": ["ghcr.io/f/not-here"]}`,
		"localhost:5000/f/zzz:1.0": `{"id": "zzz"}`,
	})
	digest := func(ref string) string { return "@sha256:" + strings.Repeat("0", 60) + fmt.Sprintf("%04d", len(ref)) }
	tests := []struct {
		name, file string
		want       []devcontainer.Feature
	}{
		{"dependsOn pulls its Feature in first, with its options, installsAfter orders the rest", `{"features": {
			"ghcr.io/f/yarn:1": {},
			"ghcr.io/f/common:2": "latest",
			"ghcr.io/f/aaa:1": {},
		}}`, []devcontainer.Feature{
			{Ref: "ghcr.io/f/aaa" + digest("ghcr.io/f/aaa:1"), ID: "aaa"},
			{Ref: "ghcr.io/f/common" + digest("ghcr.io/f/common:2"), ID: "common", Env: []string{"USER=auto", "VERSION=latest"}},
			{Ref: "ghcr.io/f/node" + digest("ghcr.io/f/node:1"), ID: "node", Env: []string{"NVM_INSTALL=true", "VERSION=20"}},
			{Ref: "ghcr.io/f/yarn" + digest("ghcr.io/f/yarn:1"), ID: "yarn"},
		}},
		{"the file's options win over a dependsOn's", `{"features": {"ghcr.io/f/yarn:1": {}, "ghcr.io/f/node:1": {"version": "22", "nvm-install": false}}}`, []devcontainer.Feature{
			{Ref: "ghcr.io/f/node" + digest("ghcr.io/f/node:1"), ID: "node", Env: []string{"NVM_INSTALL=false", "VERSION=22"}},
			{Ref: "ghcr.io/f/yarn" + digest("ghcr.io/f/yarn:1"), ID: "yarn"},
		}},
		{"overrideFeatureInstallOrder goes first within a round", `{"features": {"ghcr.io/f/aaa:1": {}, "localhost:5000/f/zzz:1.0": {}}, "overrideFeatureInstallOrder": ["localhost:5000/f/zzz"]}`, []devcontainer.Feature{
			{Ref: "localhost:5000/f/zzz" + digest("localhost:5000/f/zzz:1.0"), ID: "zzz"},
			{Ref: "ghcr.io/f/aaa" + digest("ghcr.io/f/aaa:1"), ID: "aaa"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := devcontainer.Read(context.Background(), []byte(tt.file), devcontainer.Sources{Feature: fetch})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(d.Features, tt.want) {
				t.Errorf("got %+v\nwant %+v", d.Features, tt.want)
			}
		})
	}
}

func TestFeaturesArePulledThroughTheOutboundRules(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	testkit.PushFeature(t, host, "f/base:1", `{"id": "base"}`, "")
	testkit.PushFeature(t, host, "f/tool:1", `{"id": "tool", "dependsOn": {"`+host+`/f/base:1": {}}}`, "")
	file := []byte(`{"features": {"` + host + `/f/tool:1": {}}}`)
	through := func(tr *outbound.Dialer) devcontainer.Fetch {
		return func(ctx context.Context, ref string) (string, []byte, error) {
			return ociimage.Artifact(ctx, ref, protocol.MaxFeatureLayer, ociimage.Options{Transport: tr.Transport()})
		}
	}

	d, err := devcontainer.Read(context.Background(), file, devcontainer.Sources{Feature: through(&outbound.Dialer{Allow: outbound.AllowLoopback})})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	var ids []string
	for _, f := range d.Features {
		ids = append(ids, f.ID)
		if !strings.HasPrefix(f.Ref, host+"/f/"+f.ID+"@sha256:") {
			t.Errorf("got ref %s, want %s/f/%s pinned by digest", f.Ref, host, f.ID)
		}
	}
	if !reflect.DeepEqual(ids, []string{"base", "tool"}) {
		t.Errorf("got Features %v, want base (which tool dependsOn) then tool", ids)
	}

	// A Runner whose outbound rules refuse the registry's address.
	_, err = devcontainer.Read(context.Background(), file, devcontainer.Sources{Feature: through(&outbound.Dialer{})})
	if !errors.Is(err, errdefs.ErrForbidden) || !strings.Contains(err.Error(), `features["`+host+`/f/tool:1"]`) {
		t.Errorf("got %v, want ErrForbidden naming the feature", err)
	}
	// A registry not reachable.
	srv.Close()
	_, err = devcontainer.Read(context.Background(), file, devcontainer.Sources{Feature: through(&outbound.Dialer{Allow: outbound.AllowLoopback})})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), `features["`+host+`/f/tool:1"]`) {
		t.Errorf("got %v, want ErrUnavailable naming the feature", err)
	}
}

// TestContainerEnvIsReadFromTheImageAndItsFeatures: ${containerEnv:X} in
// containerEnv reads the image's environment with its Features'
// containerEnv over it; in remoteEnv, the file's containerEnv over that.
// The image's config is read once, and only when a name needs it.
func TestContainerEnvIsReadFromTheImageAndItsFeatures(t *testing.T) {
	fetch := fakeFetch(t, map[string]string{"ghcr.io/f/go:1": `{"id": "go", "containerEnv": {"GOPATH": "/go", "GOROOT": "/usr/local/go", "PATH": "/usr/local/go/bin:${PATH}"}}`})
	calls := 0
	imageEnv := func(ctx context.Context, ref string) ([]string, error) {
		calls++
		if ref != "registry.test/app:1" {
			return nil, fmt.Errorf("no %s: %w", ref, errdefs.ErrNotFound)
		}
		return []string{"LANG=C.UTF-8", "GOPATH=/image-go"}, nil
	}
	tests := []struct {
		name, file string
		want       []devcontainer.Variable
		calls      int
		err        string
		notes      []string
	}{
		{"the image's, its Features' over it, the file's over both", `{"image": "registry.test/app:1", "features": {"ghcr.io/f/go:1": {}},
			"containerEnv": {"TOOLS": "${containerEnv:GOPATH}/tools", "L": "${containerEnv:LANG}"},
			"remoteEnv": {"BIN": "${containerEnv:TOOLS}/bin", "ROOT": "${containerEnv:GOROOT}"}}`,
			[]devcontainer.Variable{{"BIN", "/go/tools/bin"}, {"L", "C.UTF-8"}, {"ROOT", "/usr/local/go"}, {"TOOLS", "/go/tools"}}, 1, "", nil},
		{"no name the image must give: its config is not read", `{"image": "registry.test/app:1", "features": {"ghcr.io/f/go:1": {}}, "remoteEnv": {"R": "${containerEnv:GOROOT}"}}`,
			[]devcontainer.Variable{{"R", "/usr/local/go"}}, 0, "", nil},
		{"an image whose config cannot be read", `{"image": "registry.test/gone:1", "remoteEnv": {"L": "${containerEnv:LANG}"}}`,
			nil, 1, `remoteEnv["L"]: ${containerEnv:LANG} is read from the image registry.test/gone:1, whose config could not be read: no registry.test/gone:1`, nil},
		{"a name no Variable takes: left out with a note, its value not read", `{"image": "registry.test/gone:1", "remoteEnv": {"PATH": "${containerEnv:PATH}:/x", "A": "a"}}`,
			[]devcontainer.Variable{{"A", "a"}}, 0, "", []string{`remoteEnv["PATH"]: not set; the Sandbox sets it`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls = 0
			unset := func(name string) string {
				if name == "PATH" {
					return "the Sandbox sets it"
				}
				return ""
			}
			d, err := devcontainer.Read(context.Background(), []byte(tt.file), devcontainer.Sources{Feature: fetch, ImageEnv: imageEnv, Unset: unset})
			switch {
			case tt.err != "" && (!errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("got %v, want an error saying %q, its class kept", err, tt.err)
			case tt.err == "" && err != nil:
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(d.Variables, tt.want) || calls != tt.calls || tt.name == "the image's, its Features' over it, the file's over both" &&
				!slices.Equal(d.Config.ContainerEnv, []string{"L=C.UTF-8", "TOOLS=/go/tools"}) {
				t.Errorf("got %q reading the image %d times, want %q and %d", d.Variables, calls, tt.want, tt.calls)
			}
			if !reflect.DeepEqual(d.Notes, tt.notes) {
				t.Errorf("got notes %q, want %q", d.Notes, tt.notes)
			}
		})
	}
}
