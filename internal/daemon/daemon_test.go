package daemon

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/store"
)

func TestCommandsRunUnderTheCLI(t *testing.T) {
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"runner", "token", "create"}, 2, "usage: kndl runner token create --name NAME"},
		{[]string{"runner", "token", "create", "--name"}, 1, "flag needs an argument: -name"},
	}
	for _, tt := range tests {
		var errOut bytes.Buffer
		code := cli.Run(context.Background(), tt.args, cli.IO{Stdout: &bytes.Buffer{}, Stderr: &errOut, Stdin: strings.NewReader(""),
			Getenv: func(string) string { return "" }}, Commands()...)
		if code != tt.code || !strings.Contains(errOut.String(), tt.err) {
			t.Errorf("kndl %q: exit %d, stderr %q; want %d and %q", tt.args, code, errOut.String(), tt.code, tt.err)
		}
	}
	// kndl help lists every one of them among the CLI's.
	var errOut bytes.Buffer
	cli.Run(context.Background(), []string{"help"}, cli.IO{Stdout: &bytes.Buffer{}, Stderr: &errOut, Getenv: func(string) string { return "" }}, Commands()...)
	for _, c := range append(Commands(), cli.Command{Name: "runner ls"}) {
		if !strings.Contains(errOut.String(), "\n  "+c.Name+" ") {
			t.Errorf("kndl help does not list %q:\n%s", c.Name, errOut.String())
		}
	}
}

// TestHubBackupCopiesTheStoreAndRefusesAFileThatExists: kndl hub backup
// writes a copy that opens as a store; asked again onto it, it refuses.
func TestHubBackupCopiesTheStoreAndRefusesAFileThatExists(t *testing.T) {
	home := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(home, "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Runners.CreateRunner(context.Background(), "kept", ""); err != nil {
		t.Fatal(err)
	}
	defer st.Close() // open while the backup runs, as a Hub's is
	to := filepath.Join(t.TempDir(), "copy.db")
	run := func() (int, string, string) {
		return kndl(map[string]string{"KNDL_HOME": home}, "hub", "backup", "--to", to)
	}
	if code, out, errOut := run(); code != 0 || !strings.Contains(out, "Backed up") {
		t.Fatalf("kndl hub backup: exit %d\n%s\n%s", code, out, errOut)
	}
	b, err := store.Open(context.Background(), to)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if rs, err := b.Runners.List(context.Background()); err != nil || len(rs) != 1 || rs[0].Name != "kept" {
		t.Fatalf("the copy's Runners: %+v, %v", rs, err)
	}
	if code, _, errOut := run(); code != 1 || !strings.Contains(errOut, "exists") {
		t.Fatalf("a second backup onto the copy: exit %d, %s; want refused", code, errOut)
	}
}
