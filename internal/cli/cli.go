// Package cli is the kndl commands a person runs against a Hub, and the
// hidden ones the Runner runs inside a Sandbox. It reaches the Hub through
// its API alone (internal/api, internal/apiclient), and never imports
// internal/hub, internal/store or internal/runner (tests/style checks):
// the commands that run a Hub or a Runner, or open the Hub's store, are
// internal/daemon's, which cmd/kndl hands to Run with these.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"kndl.dev/kndl/internal/apiclient"
)

// IO is what a command reads and writes; tests give their own.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// Command is one subcommand. Names with a space are nested ("runner token").
type Command struct {
	Name    string
	Usage   string // arguments, after the name
	Summary string
	Hidden  bool // run by the Runner and the mod in a Sandbox; kndl help leaves it out
	Run     func(ctx context.Context, io IO, args []string) error
}

func commands() []Command {
	return []Command{
		{Name: "runner ls", Summary: "list paired Runners", Run: runnerList},
		{Name: "runner revoke", Usage: "NAME", Summary: "revoke a Runner's token and disconnect it (your own; the Owner any)", Run: runnerRevoke},
		{Name: "runner share", Usage: "NAME", Summary: "let every Member's Sessions run on a Runner (Owner only)", Run: runnerShare(true)},
		{Name: "runner unshare", Usage: "NAME", Summary: "keep a Runner to the Member who paired it; the others' Sessions there sleep (Owner only)", Run: runnerShare(false)},
		{Name: "usage", Usage: "[--days N] [--all] [--json]", Summary: "show what your Sessions spent (everyone's with --all, the Owner's alone): the estimated cost per day, each spend cap's use today, and the tokens by day, Member and Repo", Run: usageCommand},
		{Name: "models", Summary: "list the models and efforts your Sessions may run: what every Runner you may use takes", Run: modelList},
		{Name: "new", Usage: "--repo URL_OR_PATH [--runner NAME] [--model M] [--effort E] [--attempts N] [PROMPT | -]", Summary: "start a Session with a first prompt (from stdin with -), or with --attempts an attempt set of 2 to 8", Run: sessionNew},
		{Name: "attempts", Usage: "SET_ID [--keep SESSION_ID --others sleep|archive] [--json]", Summary: "show an attempt set ranked (its check passed first, then the smaller diff, then the lower cost), or keep one attempt and sleep or archive the others", Run: attemptsShow},
		{Name: "ls", Usage: "[--mine] [--waiting] [--repo URL] [--state S,...] [--creator LOGIN] [--search TEXT] [--json]", Summary: "list Sessions, filtered as the Sessions page filters them", Run: sessionList},
		{Name: "show", Usage: "ID [--json]", Summary: "show a Session and its transcript", Run: sessionShow},
		{Name: "diff", Usage: "ID [--json]", Summary: "show a Session's changes against the branch it started from: its files' diffs and its commits", Run: sessionDiff},
		{Name: "watch", Usage: "ID [--after SEQ] [--until-idle] [--json]", Summary: "follow a Session's transcript live", Run: sessionWatch},
		{Name: "prompt", Usage: "ID [--attach FILE]... [TEXT | -]", Summary: "queue a prompt (from stdin with - or no TEXT), with files for Claude to read", Run: sessionPrompt},
		{Name: "attachments", Usage: "ID [get ATTACHMENT_ID [-o FILE|-]] [--json]", Summary: "list the files attached to a Session's prompts, or download one", Run: sessionAttachments},
		{Name: "queue", Usage: "ID [edit PROMPT_ID TEXT|- | mv PROMPT_ID N | cancel PROMPT_ID] [--json]", Summary: "list a Session's queued prompts, or edit, reorder or cancel one", Run: sessionQueue},
		{Name: "cancel", Usage: "ID PROMPT_ID", Summary: "cancel a queued prompt", Run: sessionCancelPrompt},
		{Name: "answer", Usage: "ID [--question QID] [--option N]... [TEXT]...", Summary: "answer the question Claude asks: each --option N, then each TEXT, answers its questions in order", Run: sessionAnswer},
		{Name: "stop-turn", Usage: "ID [--json]", Summary: "interrupt the running Turn", Run: sessionAction(apiclient.StopTurn, "Stopping the Turn.")},
		{Name: "stop-subagent", Usage: "ID AGENT_ID", Summary: "stop one of a Session's subagents (kndl show lists them) at its next tool call; the main conversation goes on", Run: sessionStopSubagent},
		{Name: "update", Usage: "ID [--title T] [--model M] [--effort E]", Summary: "rename a Session, or change its model and effort (it restarts to take them)", Run: sessionUpdate},
		{Name: "sleep", Usage: "ID [--json]", Summary: "stop a Session's Claude Code and Sandbox, keeping its disks", Run: sessionAction(apiclient.Sleep, "The Session is asleep.")},
		{Name: "wake", Usage: "ID [--json]", Summary: "start an asleep Session again, or retry a failed one (a prompt wakes it too)", Run: sessionAction(apiclient.Wake, "Waking the Session.")},
		{Name: "restart", Usage: "ID [--json]", Summary: "stop an active Session's Claude Code and start it again into the same conversation", Run: sessionAction(apiclient.Restart, "Restarting the Session into the same conversation.")},
		{Name: "keep-awake", Usage: "ID on|off [--json]", Summary: "keep a Session awake while idle, or let it sleep after the Hub's idle time", Run: sessionKeepAwake},
		{Name: "thread-context", Usage: "ID on|off [--json]", Summary: "show others' comments on a Session's GitHub issue or pull request in its history, as context (never prompts)", Run: sessionThreadContext},
		{Name: "archive", Usage: "ID", Summary: "remove a Session's Sandbox, its disks and Workspace kept on its Runner (RUNNER_ARCHIVE_KEEP)", Run: sessionAction(apiclient.Archive, "The Session is archived.")},
		{Name: "restore", Usage: "ID", Summary: "bring an archived Session back asleep, as it was (a prompt wakes it)", Run: sessionAction(apiclient.Restore, "The Session is restored and asleep.")},
		{Name: "fork", Usage: "ID [--at TURN] [--json] [PROMPT | -]", Summary: "start a new Session from a copy of an asleep one (Workspace, disks, conversation) as it was at the end of its last Turn; PROMPT is its first (your Sessions only)", Run: sessionFork},
		{Name: "token set", Summary: "store your Claude setup token on the Hub (read from stdin)", Run: tokenSet},
		{Name: "var set", Usage: "(--repo URL | --shared) [--sensitive] [--at-build] [--loads-code] NAME", Summary: "set a Variable; its value is read from stdin", Run: varSet},
		{Name: "var ls", Usage: "(--repo URL | --shared) [--json]", Summary: "list Variables (Sensitive values never shown)", Run: varList},
		{Name: "var rm", Usage: "(--repo URL | --shared) NAME", Summary: "remove a Variable", Run: varChange("var rm", (*apiclient.Client).DeleteVariable, false, "Removed")},
		{Name: "var link", Usage: "--repo URL NAME", Summary: "make a Repo use a Shared variable", Run: varChange("var link", (*apiclient.Client).LinkVariable, true, "Linked")},
		{Name: "var unlink", Usage: "--repo URL NAME", Summary: "stop a Repo using a Shared variable", Run: varChange("var unlink", (*apiclient.Client).UnlinkVariable, true, "Unlinked")},
		{Name: "mcp server add", Usage: "hub:SLUG --name NAME --url URL [--header KEY:HEADER:FORMAT... | --oauth]", Summary: "add a remote MCP server behind the Hub's Gateway, with the header secrets it needs or behind OAuth", Run: mcpServerAdd},
		{Name: "mcp server edit", Usage: "hub:SLUG --name NAME --url URL [--header KEY:HEADER:FORMAT... | --oauth] [--yes]", Summary: "change an MCP server; says whose values it clears, and saves that only with --yes", Run: mcpServerEdit},
		{Name: "mcp server ls", Usage: "[--json]", Summary: "list the MCP servers", Run: mcpServerList},
		{Name: "mcp install", Usage: "ID --server hub:SLUG --name NAME (--global | --repo URL...)", Summary: "make an Installation of an MCP server, global (Owner only) or on in the Repos named", Run: mcpInstall},
		{Name: "mcp install repos", Usage: "ID --repo URL...", Summary: "set the Repos an Installation is on in", Run: mcpInstallRepos},
		{Name: "mcp secret set", Usage: "INSTALLATION KEY", Summary: "set an Installation's header secret value; it is read from stdin", Run: mcpSecretSet},
		{Name: "mcp connect", Usage: "INSTALLATION", Summary: "connect an OAuth Installation to an account: prints the URL to open in your signed-in browser", Run: mcpConnect},
		{Name: "mcp disconnect", Usage: "INSTALLATION", Summary: "drop an OAuth Installation's tokens; its running Sessions' calls stop at once", Run: mcpDisconnect},
		{Name: "mcp client set", Usage: "INSTALLATION --client-id ID", Summary: "enter the OAuth client of an authorization server without Dynamic Client Registration; its secret is read from stdin", Run: mcpClientSet},
		{Name: "mcp off", Usage: "INSTALLATION --repo URL", Summary: "turn an Installation off for a Repo", Run: mcpTurn(true)},
		{Name: "mcp on", Usage: "INSTALLATION --repo URL", Summary: "turn an Installation back on for a Repo", Run: mcpTurn(false)},
		{Name: "mcp ls", Usage: "[--repo URL] [--json]", Summary: "list Installations (values never shown), and whether each is on in a Repo", Run: mcpList},
		{Name: "mcp log", Usage: "--repo URL [--json]", Summary: "list a Repo's Installation changes: who, what, when", Run: mcpLog},
		{Name: "env show", Usage: "--repo URL [--json]", Summary: "show a Repo's Environment: its current version and its draft", Run: envCommand("env show", nil, envShow)},
		{Name: "env edit", Usage: "--repo URL [--file SETTINGS.json] [--image I] [--bootstrap-file F] [--start-file F] [--cpus N] [--memory MIB] [--check CMD] [--from-devcontainer[=PATH] [--follow]] [--json]", Summary: "change the Repo's Environment draft", Run: envEditCommand()},
		{Name: "env test", Usage: "--repo URL [--json]", Summary: "run a Test build of the draft on a Runner of yours, its log live", Run: envCommand("env test", nil, envTest)},
		{Name: "env apply", Usage: "--repo URL [--json]", Summary: "make the draft the next version (one that changes the Build needs a passed Test build)", Run: envCommand("env apply", nil, envApply)},
		{Name: "env log", Usage: "--repo URL [--json]", Summary: "list a Repo's Environment versions: who changed what, when", Run: envCommand("env log", nil, envLog)},
		{Name: "repo edit", Usage: "--repo URL [--max-turns N] [--max-turn-hours H] [--max-spend USD] [--max-session-spend USD] [--github-attempts[=false]] [--auto-fix-ci[=false]] [--auto-fix-reviews[=false]] [--auto-fix-max N] [--trigger-label NAME] [--json]", Summary: "change a Repo's settings, or with none show them: the limits its Sessions started from GitHub run under (0: no limit) and whether a mention with attempts=N starts an attempt set, whether failing checks and reviews on its Sessions' pull requests go back to them, and the label that starts a Session from an issue", Run: repoEditCommand()},
		{Name: "login", Usage: "HUB_URL", Summary: "sign this machine in to a Hub through your browser", Run: login},
		{Name: "logout", Summary: "revoke this machine's CLI token and forget it", Run: logout},
		{Name: "invite", Usage: "GITHUB_LOGIN [--hours N]", Summary: "invite someone (Owner only): print their link, once", Run: inviteCreate},
		{Name: "invite ls", Usage: "[--json]", Summary: "list Invites (Owner only)", Run: inviteList},
		{Name: "invite revoke", Usage: "ID", Summary: "revoke an unused Invite (Owner only)", Run: inviteRevoke},
		{Name: "notify add", Usage: "URL [--format json|slack]", Summary: "post your Sessions' events (a question waiting, a Turn ended, ...) to a webhook; print its signing secret, once", Run: notifyAdd},
		{Name: "notify ls", Usage: "[--json]", Summary: "list your notification webhooks, and any failing or stopped", Run: notifyList},
		{Name: "notify edit", Usage: "ID URL [--format json|slack]", Summary: "change a notification webhook; a stopped one posts again", Run: notifyEdit},
		{Name: "notify rm", Usage: "ID", Summary: "remove a notification webhook", Run: notifyRemove},
		{Name: "member ls", Usage: "[--json]", Summary: "list the Hub's Members", Run: memberList},
		{Name: "member remove", Usage: "GITHUB_LOGIN", Summary: "remove a Member: sign them out everywhere (Owner only)", Run: memberRemove},
		{Name: "audit", Usage: "[--before SEQ] [--limit N] [--json]", Summary: "list the Hub's audit log, newest first (Owner only)", Run: auditList},
		{Name: "loadtest", Usage: "[--runners N] [--sessions N] [--watchers N] [--prompts-per-minute N] [--duration D] [--awake-fraction F] [--burst N] [--allow-remote]", Summary: "load this Hub (on loopback) with simulated Runners, Sessions, prompts and watchers, with its Owner's token, and report prompt to first Event, Events/s, the Hub's CPU and memory per Session and every error (Owner only)", Run: loadtestCommand},
		{Name: "audit verify", Usage: "[--json]", Summary: "check the audit log's hash chain and say where it first breaks (Owner only)", Run: auditVerify},

		// Run inside a Sandbox by the Runner and the mod.
		{Name: "mod hook", Summary: "carry a Claude Code hook event to the Hub", Hidden: true, Run: modHook},
		{Name: "claude seed", Usage: "CONFIG_DIR WORKDIR", Summary: "seed Claude Code's config so no dialog waits", Hidden: true, Run: claudeSeed},
		{Name: "claude editor", Usage: "STAGED FILE", Summary: "Claude Code's external editor: put the prompt the Runner staged in FILE", Hidden: true, Run: claudeEditor},
		{Name: "transcript follow", Summary: "stream a transcript's Events", Hidden: true, Run: hostedCommand("transcript follow")},
		{Name: "ports watch", Usage: "[--skip-exe DIR]", Summary: "write the listening ports when they change", Hidden: true, Run: hostedCommand("ports watch")},
		{Name: "hosted", Usage: "JOB ARGS -- JOB ARGS", Summary: "two of the above for one process start: the second writes to stderr", Hidden: true, Run: hostedPair},
		{Name: "ports dial", Usage: "PORT", Summary: "carry one connection to a port over stdin and stdout", Hidden: true, Run: portsDial},
	}
}

// ErrUsage marks an error whose message is the usage to print: Run prints
// the command's usage line and exits 2.
var ErrUsage = errors.New("usage")

// Run runs the kndl command with args (without the program name), among
// these commands and more, and returns the process exit code.
func Run(ctx context.Context, args []string, io IO, more ...Command) int {
	cmds := append(commands(), more...)
	cmd, rest := lookup(cmds, args)
	if cmd == nil {
		usage(io.Stderr, cmds)
		if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			return 0
		}
		fmt.Fprintf(io.Stderr, "\nkndl: unknown command %q\n", strings.Join(args, " "))
		return 2
	}
	if err := cmd.Run(ctx, io, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, ErrUsage) {
			fmt.Fprintf(io.Stderr, "usage: kndl %s %s\n", cmd.Name, cmd.Usage)
			return 2
		}
		fmt.Fprintf(io.Stderr, "kndl %s: %v\n", cmd.Name, err)
		return 1
	}
	return 0
}

// lookup finds the longest command name that prefixes args.
func lookup(cmds []Command, args []string) (*Command, []string) {
	var best *Command
	var n int
	for i := range cmds {
		words := strings.Fields(cmds[i].Name)
		if len(words) <= len(args) && len(words) > n && strings.Join(args[:len(words)], " ") == cmds[i].Name {
			best, n = &cmds[i], len(words)
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, args[n:]
}

func usage(w io.Writer, cmds []Command) {
	fmt.Fprintln(w, "kndl runs Claude Code unattended, each Session in its own Sandbox.\n\nUsage: kndl COMMAND [ARGS]\n\nCommands:")
	sort.SliceStable(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cmds {
		if !c.Hidden {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.Name+" "+c.Usage), c.Summary)
		}
	}
	tw.Flush()
}

// Flags makes a FlagSet for a command that prints its own usage.
func Flags(io IO, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("kndl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	return fs
}

// ParseFor parses args as Parse does, wants exactly n positional
// arguments (ErrUsage otherwise), and makes the Hub's client for the
// command.
func ParseFor(fs *flag.FlagSet, args []string, n int) ([]string, *apiclient.Client, error) {
	pos, err := Parse(fs, args)
	if err != nil {
		return nil, nil, err
	}
	if len(pos) != n {
		return nil, nil, ErrUsage
	}
	c, err := apiclient.New()
	return pos, c, err
}

// Parse parses flags anywhere among the arguments (kndl show ID --json) and
// returns the positional ones; "--" ends the flags.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
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
