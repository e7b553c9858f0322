// Package cli is the kndl command: the Hub, the Runner, kndl dev, and the
// commands a person runs against a Hub. cmd/kndl calls Run and nothing else.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"kndl.dev/kndl/internal/redact"
)

// IO is what a command reads and writes; tests give their own.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// command is one subcommand. Names with a space are nested ("runner token").
type command struct {
	name    string
	usage   string // arguments, after the name
	summary string
	hidden  bool
	run     func(ctx context.Context, io IO, args []string) error
}

func commands() []command {
	return []command{
		{name: "dev", summary: "run a Hub and a Runner on this machine (127.0.0.1, dev login)", run: runDev},
		{name: "hub", summary: "run a Hub", run: runHub},
		{name: "runner", summary: "run a Runner (needs KNDL_HUB_URL and RUNNER_TOKEN)", run: runRunner},
		{name: "runner token create", usage: "--name NAME", summary: "pair a Runner: print its token, once (works on the Hub's store)", run: runnerTokenCreate},
		{name: "runner ls", summary: "list paired Runners", run: runnerList},
		{name: "runner revoke", usage: "NAME", summary: "revoke a Runner's token and disconnect it", run: runnerRevoke},
		{name: "new", usage: "--repo URL_OR_PATH [--model M] [--effort E] [PROMPT | -]", summary: "start a Session with a first prompt (from stdin with -)", run: sessionNew},
		{name: "ls", usage: "[--json]", summary: "list Sessions", run: sessionList},
		{name: "show", usage: "ID [--json]", summary: "show a Session and its transcript", run: sessionShow},
		{name: "watch", usage: "ID [--after SEQ] [--until-idle] [--json]", summary: "follow a Session's transcript live", run: sessionWatch},
		{name: "prompt", usage: "ID [TEXT | -]", summary: "queue a prompt (from stdin with - or no TEXT)", run: sessionPrompt},
		{name: "cancel", usage: "ID PROMPT_ID", summary: "cancel a queued prompt", run: sessionCancelPrompt},
		{name: "stop-turn", usage: "ID", summary: "interrupt the running Turn", run: sessionAction("stop-turn", "Stopping the Turn.")},
		{name: "update", usage: "ID [--title T] [--model M] [--effort E]", summary: "rename a Session, or change its model and effort (it restarts to take them)", run: sessionUpdate},
		{name: "sleep", usage: "ID", summary: "stop a Session's Claude Code and Sandbox, keeping its disks", run: sessionAction("sleep", "The Session is asleep.")},
		{name: "wake", usage: "ID", summary: "start an asleep Session again (a prompt wakes it too)", run: sessionAction("wake", "Waking the Session.")},
		{name: "token set", summary: "store your Claude setup token on the Hub (read from stdin)", run: tokenSet},
		{name: "var set", usage: "(--repo URL | --shared) [--sensitive] [--at-build] NAME", summary: "set a Variable; its value is read from stdin", run: varSet},
		{name: "var ls", usage: "(--repo URL | --shared) [--json]", summary: "list Variables (Sensitive values never shown)", run: varList},
		{name: "var rm", usage: "(--repo URL | --shared) NAME", summary: "remove a Variable", run: varChange("var rm", http.MethodDelete, "variables", "Removed")},
		{name: "var link", usage: "--repo URL NAME", summary: "make a Repo use a Shared variable", run: varChange("var link", http.MethodPut, "links", "Linked")},
		{name: "var unlink", usage: "--repo URL NAME", summary: "stop a Repo using a Shared variable", run: varChange("var unlink", http.MethodDelete, "links", "Unlinked")},
		{name: "login", usage: "HUB_URL", summary: "sign this machine in to a Hub through your browser", run: login},
		{name: "logout", summary: "revoke this machine's CLI token and forget it", run: logout},
		{name: "invite", usage: "GITHUB_LOGIN [--hours N]", summary: "invite someone (Owner only): print their link, once", run: inviteCreate},
		{name: "invite ls", usage: "[--json]", summary: "list Invites (Owner only)", run: inviteList},
		{name: "invite revoke", usage: "ID", summary: "revoke an unused Invite (Owner only)", run: inviteRevoke},
		{name: "member ls", usage: "[--json]", summary: "list the Hub's Members", run: memberList},
		{name: "member remove", usage: "GITHUB_LOGIN", summary: "remove a Member: sign them out everywhere (Owner only)", run: memberRemove},

		// Run inside a Sandbox by the Runner and the mod.
		{name: "mod hook", summary: "carry a Claude Code hook event to the Hub", hidden: true, run: modHook},
		{name: "claude seed", usage: "CONFIG_DIR WORKDIR", summary: "seed Claude Code's config so no dialog waits", hidden: true, run: claudeSeed},
		{name: "transcript follow", summary: "stream a transcript's Events", hidden: true, run: transcriptFollow},
		{name: "ports watch", usage: "[--skip-exe DIR]", summary: "write the listening ports when they change", hidden: true, run: portsWatch},
		{name: "ports dial", usage: "PORT", summary: "carry one connection to a port over stdin and stdout", hidden: true, run: portsDial},
	}
}

// errUsage marks an error whose message is the usage to print.
var errUsage = errors.New("usage")

// Run runs the kndl command with args (without the program name) and
// returns the process exit code.
func Run(ctx context.Context, args []string, io IO) int {
	cmd, rest := lookup(args)
	if cmd == nil {
		usage(io.Stderr)
		if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			return 0
		}
		fmt.Fprintf(io.Stderr, "\nkndl: unknown command %q\n", strings.Join(args, " "))
		return 2
	}
	if err := cmd.run(ctx, io, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, errUsage) {
			fmt.Fprintf(io.Stderr, "usage: kndl %s %s\n", cmd.name, cmd.usage)
			return 2
		}
		fmt.Fprintf(io.Stderr, "kndl %s: %v\n", cmd.name, err)
		return 1
	}
	return 0
}

// lookup finds the longest command name that prefixes args.
func lookup(args []string) (*command, []string) {
	cmds := commands()
	var best *command
	var n int
	for i := range cmds {
		words := strings.Fields(cmds[i].name)
		if len(words) <= len(args) && len(words) > n && strings.Join(args[:len(words)], " ") == cmds[i].name {
			best, n = &cmds[i], len(words)
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, args[n:]
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kndl runs Claude Code unattended, each Session in its own Sandbox.\n\nUsage: kndl COMMAND [ARGS]\n\nCommands:")
	cmds := commands()
	sort.SliceStable(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cmds {
		if !c.hidden {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.name+" "+c.usage), c.summary)
		}
	}
	tw.Flush()
}

// flags makes a FlagSet for a command that prints its own usage.
func flags(io IO, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("kndl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	return fs
}

// parse parses flags anywhere among the arguments (kndl show ID --json) and
// returns the positional ones; "--" ends the flags.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// home is $KNDL_HOME, default ./.kndl, made readable only by its owner.
func home(io IO) (string, error) {
	h := io.Getenv("KNDL_HOME")
	if h == "" {
		h = ".kndl"
	}
	abs, err := filepath.Abs(h)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("make KNDL_HOME %s: %w", abs, err)
	}
	return abs, nil
}

// logger is the operator's log: text lines on stderr, level from
// KNDL_LOG_LEVEL (debug, info, warn, error).
func logger(io IO) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(io.Getenv("KNDL_LOG_LEVEL")))
	return slog.New(redact.LogHandler(slog.NewTextHandler(io.Stderr, &slog.HandlerOptions{Level: lvl})))
}
