package daemon

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/cli"
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
