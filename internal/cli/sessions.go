package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/protocol"
)

func sessionNew(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "new")
	repo := fs.String("repo", "", "the repository: a git URL, or a path on the Runner's host")
	model := fs.String("model", "", "the model: an alias or id kndl models lists (default: Claude Code's)")
	effort := fs.String("effort", "", "the effort: one the model takes, as kndl models lists (default: the model's)")
	runner := fs.String("runner", "", "the Runner to use, yours or a shared one (default: the least loaded connected one of those with room)")
	command := fs.Bool("command", false, "send a leading ! or / to Claude Code as a command, not as text")
	tries := fs.Int("attempts", 0, "start an attempt set: 2 to 8 Sessions from the one prompt, ranked by the Environment's check (kndl attempts SET_ID)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	attempts := false
	fs.Visit(func(f *flag.Flag) { attempts = attempts || f.Name == "attempts" })
	prompt, err := promptArg(io, pos)
	if err != nil || *repo == "" {
		return ErrUsage
	}
	// A local path is resolved here, so the Runner on this machine finds it.
	if st, err := os.Stat(*repo); err == nil && st.IsDir() {
		*repo, _ = filepath.Abs(*repo)
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	req := api.NewSession{Repo: *repo, Model: *model, Effort: *effort, Prompt: prompt, IsCommand: *command, Runner: *runner}
	if attempts {
		return attemptsNew(ctx, io, c, api.NewAttempts{NewSession: req, Attempts: *tries}, *asJSON)
	}
	s, err := c.NewSession(ctx, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, s)
	}
	fmt.Fprintf(io.Stdout, "Session %s is starting on %s.\nWatch it with: kndl watch %s\n", s.ID, s.RepoURL, s.ID)
	return nil
}

// modelList lists the models the Hub offers the caller's Sessions.
func modelList(ctx context.Context, io IO, args []string) error {
	offer, asTable, err := listing(ctx, io, "models", args, (*apiclient.Client).Models)
	if !asTable {
		return err
	}
	if len(offer.Models) == 0 {
		fmt.Fprintln(io.Stdout, "No Runner you may use is connected, so none offers a model: start one (kndl runner ls lists them).")
		return nil
	}
	var rows [][]string
	for _, m := range offer.Models {
		def := ""
		if m.Default {
			def = "default"
		}
		rows = append(rows, []string{m.Alias, m.ID, m.DisplayName, or(strings.Join(m.Efforts, ", "), "none"), def})
	}
	return table(io, "ALIAS\tID\tNAME\tEFFORTS\tDEFAULT", rows)
}

// promptArg is the prompt from the arguments, or stdin when there is none
// or it is "-".
func promptArg(io IO, args []string) (string, error) {
	if len(args) > 1 {
		return "", ErrUsage
	}
	if len(args) == 1 && args[0] != "-" {
		return args[0], nil
	}
	b, err := readAllLimited(io.Stdin, api.MaxPromptBytes+1)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", ErrUsage
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

func readAllLimited(r io.Reader, n int64) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	return io.ReadAll(io.LimitReader(r, n))
}

func sessionList(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "ls")
	asJSON := fs.Bool("json", false, "print JSON")
	var f api.SessionFilter
	var states string
	fs.BoolVar(&f.Mine, "mine", false, "only your Sessions")
	fs.BoolVar(&f.Waiting, "waiting", false, "only your Sessions that wait on you: awake, with no Turn running")
	fs.StringVar(&f.Repo, "repo", "", "only a Repo's Sessions: its clone URL or id")
	fs.StringVar(&states, "state", "", "only Sessions in these states, comma-separated: "+strings.Join(api.StateNames(), ", "))
	fs.StringVar(&f.Creator, "creator", "", "only Sessions a Member started: their GitHub login or id")
	fs.StringVar(&f.Search, "search", "", "only Sessions whose title holds this text, in any case")
	if _, err := Parse(fs, args); err != nil {
		return err
	}
	for _, st := range commaList(states) {
		f.States = append(f.States, api.SessionState(st))
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	ss, err := c.Sessions(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, ss)
	}
	var rows [][]string
	for _, s := range ss {
		keep := "-"
		if s.KeepAwake {
			keep = "on"
		}
		spent := "-"
		if s.Spent != nil {
			spent = s.Spent.Estimate()
		}
		rows = append(rows, []string{s.ID, stateInLine(s), or(doing(s), "-"), keep, s.RepoURL, s.Title, ago(s.CreatedAt), spent})
	}
	return table(io, "ID\tSTATE\tDOING\tKEEP AWAKE\tREPO\tTITLE\tCREATED\tSPENT", rows)
}

// stateInLine is a Session's state, with its place in its Creator's line
// for an awake place (HUB_MEMBER_MAX_AWAKE) while it waits in one.
func stateInLine(s api.Session) string {
	if s.Place > 0 {
		return fmt.Sprintf("%s, in line: place %d", s.State, s.Place)
	}
	return string(s.State)
}

// doing says, in a word, what an Active Session is doing: "turn" while a
// Turn runs, "question" while Claude waits on a person, "idle" while it
// waits for a prompt; "" for a Session not Active.
func doing(s api.Session) string {
	switch {
	case s.State != api.Active:
		return ""
	case s.Activity == "turn" || s.Activity == "question":
		return s.Activity
	}
	return "idle"
}

// doingPhrase is what doing says, as kndl show puts it.
var doingPhrase = map[string]string{"turn": "a Turn runs", "question": "Claude waits on a question", "idle": "waiting for a prompt"}

func sessionShow(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	s, err := c.Session(ctx, pos[0])
	if err != nil {
		return err
	}
	evs, err := c.Events(ctx, pos[0])
	if err != nil {
		return err
	}
	agents := subagentsOf(evs)
	if *asJSON {
		return printJSON(io, struct {
			api.SessionView
			Events    []api.Event `json:"events"`
			Subagents []subagent  `json:"subagents"`
		}{s, evs, agents})
	}
	printSession(io.Stdout, s)
	if s.EnvironmentWaiting > 0 {
		fmt.Fprintf(io.Stdout, "  Environment: version %d; version %d waits for its next wake or restart\n\n", s.EnvironmentVersion, s.EnvironmentWaiting)
	}
	for _, e := range evs {
		printEvent(io.Stdout, e)
	}
	printSubagents(io.Stdout, s.ID, agents)
	if len(s.Queue) > 0 {
		fmt.Fprintf(io.Stdout, "\nWaiting prompts:\n")
		for _, p := range s.Queue {
			fmt.Fprintf(io.Stdout, "  %s  %s  %s\n", p.ID, p.State, oneLine(p.Text, 60))
		}
	}
	printBranches(io.Stdout, s.Branches)
	return nil
}

// printBranches lists the branches a Session pushed, each with its link
// and the pull requests opened from it.
func printBranches(w io.Writer, bs []api.Branch) {
	if len(bs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nPushed branches:\n")
	for _, b := range bs {
		fmt.Fprintf(w, "  %s  %s\n", b.Name, b.URL)
		for _, p := range b.Pulls {
			fmt.Fprintf(w, "    #%d %s  %s  %s\n", p.Number, p.Line(), oneLine(p.Title, 60), p.URL)
		}
	}
}

// printSession writes a Session's head: where it runs, its state and
// why, what it is doing, Keep awake, its model, what it spent.
func printSession(w io.Writer, v api.SessionView) {
	s := v.Session
	state := stateInLine(s)
	if d := doing(s); d != "" {
		state += ": " + doingPhrase[d]
	}
	keep := "off"
	if s.KeepAwake {
		keep = "on"
	}
	fmt.Fprintf(w, "Session %s\n  repo:       %s\n  state:      %s\n", s.ID, s.RepoURL, state)
	switch {
	case s.State == api.Failed:
		fmt.Fprintf(w, "  failed:     %s\n              (kndl wake %s retries it)\n", or(s.StateDetail, "no reason was recorded"), s.ID)
	case s.StateDetail != "":
		fmt.Fprintf(w, "  why:        %s\n", s.StateDetail)
	}
	if g := sandboxGitPhrase[s.SandboxGit]; g != "" {
		fmt.Fprintf(w, "  git:        %s\n", g)
	}
	fmt.Fprintf(w, "  keep awake: %s\n  model:      %s %s\n  created:    %s\n", keep, or(s.Model, "default"), s.Effort, s.CreatedAt.Format(time.RFC3339))
	if f := v.ForkOf; f != nil {
		fmt.Fprintf(w, "  fork of:    %s at the end of Turn %d\n", f.ParentID, f.Turn)
	}
	if v.AttemptSet != "" {
		fmt.Fprintf(w, "  attempt of: set %s (kndl attempts %s ranks it)\n", v.AttemptSet, v.AttemptSet)
	}
	fmt.Fprintf(w, "  spent:      %s\n", v.Usage.Summary())
	for _, m := range v.Usage.Models {
		fmt.Fprintf(w, "              %s: %s\n", m.Model, api.Spent{Tokens: m.Tokens, EstimatedUSD: m.EstimatedUSD}.Summary())
	}
	fmt.Fprintln(w)
}

// sandboxGitPhrase says what git in the Sandbox may do with its token.
var sandboxGitPhrase = map[string]string{
	"write": "push and pull requests",
	"read":  "read-only, its Creator can't push to this Repo",
}

func sessionPrompt(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "prompt")
	command := fs.Bool("command", false, "send a leading ! or / to Claude Code as a command, not as text")
	asJSON := fs.Bool("json", false, "print JSON")
	var files stringList
	fs.Var(&files, "attach", "attach a file to the prompt (again for each file)")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return ErrUsage
	}
	text, err := promptArg(io, pos[1:])
	if err != nil {
		return err
	}
	ids, err := attachFiles(ctx, pos[0], files)
	if err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	p, err := c.QueuePrompt(ctx, pos[0], api.PromptRequest{Text: text, IsCommand: *command, Attachments: ids})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, p)
	}
	fmt.Fprintf(io.Stdout, "Queued prompt %s%s.\n", p.ID, attachedNote(p.Attachments))
	return nil
}

func sessionCancelPrompt(ctx context.Context, io IO, args []string) error {
	if len(args) != 2 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	return done(io, c.CancelPrompt(ctx, args[0], args[1]), "Cancelled.")
}

// sessionQueue lists a Session's queue, or changes one prompt in it:
// edit PROMPT_ID TEXT|-, mv PROMPT_ID N (its new place, from 1), cancel
// PROMPT_ID. Only queued prompts change; the one on its way is shown
// first.
func sessionQueue(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "queue")
	asJSON := fs.Bool("json", false, "print the queue as JSON")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	id := pos[0]
	if len(pos) == 1 {
		s, err := c.Session(ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(io, s.Queue)
		}
		if len(s.Queue) == 0 {
			fmt.Fprintln(io.Stdout, "The queue is empty.")
			return nil
		}
		rows := make([][]string, len(s.Queue))
		for i, p := range s.Queue {
			rows[i] = []string{strconv.Itoa(i + 1), p.ID, p.State, oneLine(p.Text, 70)}
		}
		return table(io, "#\tPROMPT\tSTATE\tTEXT", rows)
	}
	if len(pos) < 3 {
		return ErrUsage
	}
	prompt := pos[2]
	switch pos[1] {
	case "edit":
		text, err := promptArg(io, pos[3:])
		if err != nil {
			return err
		}
		err = c.EditPrompt(ctx, id, prompt, api.PromptRequest{Text: text})
		return done(io, err, "Edited.")
	case "mv":
		if len(pos) != 4 {
			return ErrUsage
		}
		n, err := strconv.Atoi(pos[3])
		if err != nil || n < 1 {
			return fmt.Errorf("mv %s %q: give its new place in the queue, from 1", pos[2], pos[3])
		}
		err = c.MovePrompt(ctx, id, prompt, api.PromptMove{Position: n})
		return done(io, err, fmt.Sprintf("Moved to place %d.", n))
	case "cancel":
		if len(pos) != 3 {
			return ErrUsage
		}
		return done(io, c.CancelPrompt(ctx, id, prompt), "Cancelled.")
	}
	return ErrUsage
}

// done says what a change did, once it did.
func done(io IO, err error, said string) error {
	if err == nil {
		fmt.Fprintln(io.Stdout, said)
	}
	return err
}

// sessionAction is a command that asks the Hub for one of a Session's
// actions, the command's name.
func sessionAction(action apiclient.SessionAction, done string) func(context.Context, IO, []string) error {
	return func(ctx context.Context, io IO, args []string) error {
		fs := Flags(io, string(action))
		asJSON := fs.Bool("json", false, "print the Session as it is after, as JSON")
		pos, err := Parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return ErrUsage
		}
		return changeSession(ctx, io, pos[0], *asJSON, func(c *apiclient.Client) error { return c.Act(ctx, pos[0], action) }, done)
	}
}

// sessionSwitch is a command that sets one of the Creator's switches of a
// Session (ID on|off) by set, saying done[on] after.
func sessionSwitch(name string, set func(c *apiclient.Client, ctx context.Context, id string, on bool) error, done map[bool]string) func(context.Context, IO, []string) error {
	return func(ctx context.Context, io IO, args []string) error {
		fs := Flags(io, name)
		asJSON := fs.Bool("json", false, "print the Session as it is after, as JSON")
		pos, err := Parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 2 || (pos[1] != "on" && pos[1] != "off") {
			return ErrUsage
		}
		on := pos[1] == "on"
		return changeSession(ctx, io, pos[0], *asJSON, func(c *apiclient.Client) error { return set(c, ctx, pos[0], on) }, done[on])
	}
}

// sessionKeepAwake sets a Session's Keep awake switch.
var sessionKeepAwake = sessionSwitch("keep-awake", (*apiclient.Client).KeepAwake, map[bool]string{
	true:  "Keep awake is on: the Session stays awake while idle, and wakes when its Runner is back.",
	false: "Keep awake is off: the Session goes to sleep once idle for the Hub's HUB_SESSION_IDLE (30 minutes unless set).",
})

// sessionThreadContext sets whether others' comments on a Session's GitHub
// issue or pull request show in its history.
var sessionThreadContext = sessionSwitch("thread-context", (*apiclient.Client).ThreadContext, map[bool]string{
	true:  "Others' comments on the Session's GitHub issue or pull request now show in its history as context; they are never prompts.",
	false: "Others' comments on the Session's GitHub issue or pull request no longer show in its history.",
})

// changeSession sends one change of the Session id, then says done, or
// with asJSON prints the Session as it is after.
func changeSession(ctx context.Context, io IO, id string, asJSON bool, change func(*apiclient.Client) error, done string) error {
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	if err := change(c); err != nil {
		return err
	}
	if !asJSON {
		fmt.Fprintln(io.Stdout, done)
		return nil
	}
	s, err := c.Session(ctx, id)
	if err != nil {
		return err
	}
	return printJSON(io, s)
}

// sessionWatch streams a Session's transcript, reconnecting from the last
// sequence number it printed.
func sessionWatch(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "watch")
	after := fs.Int64("after", 0, "start after this sequence number")
	asJSON := fs.Bool("json", false, "print one JSON Event per line")
	untilIdle := fs.Bool("until-idle", false, "exit once a Turn ends with no prompt waiting")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	id := pos[0]
	last := *after
	for wait := 250 * time.Millisecond; ; wait = min(wait*2, 10*time.Second) {
		done, err := watchOnce(ctx, c, id, &last, func(e protocol.Event) (bool, error) {
			if *asJSON {
				b, _ := json.Marshal(e)
				fmt.Fprintf(io.Stdout, "%s\n", b)
			} else {
				printEvent(io.Stdout, e)
			}
			return *untilIdle && e.Kind == protocol.EventTurnEnd && queueEmpty(ctx, c, id), nil
		})
		if done || ctx.Err() != nil {
			return nil
		}
		var apiErr *apiclient.Error
		if errors.As(err, &apiErr) {
			return err
		}
		fmt.Fprintf(io.Stderr, "kndl watch: %v; reconnecting\n", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func queueEmpty(ctx context.Context, c *apiclient.Client, id string) bool {
	s, err := c.Session(ctx, id)
	return err == nil && len(s.Queue) == 0
}

// watchOnce follows one WebSocket until it ends or each returns true.
func watchOnce(ctx context.Context, c *apiclient.Client, id string, last *int64, each func(protocol.Event) (bool, error)) (bool, error) {
	w, err := c.Watch(ctx, id, *last)
	if err != nil {
		return false, err
	}
	defer w.Close()
	for {
		m, err := w.Next(ctx)
		if err != nil {
			return false, err
		}
		if m.Type != "event" || m.Event == nil {
			continue // the Session as it changes: kndl show reads it
		}
		*last = m.Event.Seq
		if done, err := each(*m.Event); done || err != nil {
			return done, err
		}
	}
}

// printEvent writes one Event as a line or a few a person reads.
func printEvent(w io.Writer, ev protocol.Event) {
	at := ev.At.Local().Format("15:04:05")
	indent := ""
	if ev.Agent != "" {
		indent = "    "
	}
	switch ev.Kind {
	case protocol.EventPrompt:
		fmt.Fprintf(w, "%s %s> %s\n", at, indent, indentLines(ev.Text, "  "))
	case protocol.EventText:
		fmt.Fprintf(w, "%s %sclaude: %s\n", at, indent, indentLines(ev.Text, "  "))
	case protocol.EventThinking:
		fmt.Fprintf(w, "%s %s(thinking) %s\n", at, indent, oneLine(ev.Text, 100))
	case protocol.EventToolUse:
		fmt.Fprintf(w, "%s %s%s %s\n", at, indent, ev.Tool, oneLine(string(ev.Input), 120))
	case protocol.EventToolResult:
		mark := "->"
		if ev.IsError {
			mark = "-> error:"
		}
		fmt.Fprintf(w, "%s %s  %s %s\n", at, indent, mark, oneLine(ev.Text, 120))
	case protocol.EventTurnStart:
		fmt.Fprintf(w, "%s %s-- turn started\n", at, indent)
	case protocol.EventTurnEnd:
		fmt.Fprintf(w, "%s %s-- turn ended (%s)\n", at, indent, ev.Reason)
		if len(ev.TurnUsage) > 0 {
			fmt.Fprintf(w, "%s %s   spent %s\n", at, indent, api.SpentOf(ev.TurnUsage).Summary())
		}
	case protocol.EventError:
		fmt.Fprintf(w, "%s %serror: %s\n", at, indent, ev.Text)
	case protocol.EventQuestion:
		printQuestion(w, at+" "+indent, ev)
	case protocol.EventAnswer:
		fmt.Fprintf(w, "%s %sanswered: %s\n", at, indent, ev.Text)
	case protocol.EventSubagentStart:
		fmt.Fprintf(w, "%s %s-- subagent %s started (%s)\n", at, indent, ev.Agent, or(ev.Text, "?"))
	case protocol.EventSubagentStop:
		fmt.Fprintf(w, "%s %s-- subagent %s: %s\n", at, indent, ev.Agent, ev.Text)
	case protocol.EventSubagentEnd:
		fmt.Fprintf(w, "%s %s-- subagent %s %s\n", at, indent, ev.Agent, endedAs(ev.Reason))
	default:
		fmt.Fprintf(w, "%s %s[%s] %s\n", at, indent, ev.Kind, oneLine(ev.Text, 120))
	}
}

// printQuestion shows what Claude asks, each question with its numbered
// options, and how to answer.
func printQuestion(w io.Writer, pre string, ev protocol.Event) {
	var in struct {
		Questions []struct {
			Question string `json:"question"`
			Options  []struct {
				Label       string `json:"label"`
				Description string `json:"description"`
			} `json:"options"`
		} `json:"questions"`
	}
	if json.Unmarshal(ev.Input, &in) != nil || len(in.Questions) == 0 {
		fmt.Fprintf(w, "%s[question] %s %s\n", pre, ev.Tool, oneLine(string(ev.Input), 120))
		return
	}
	for _, q := range in.Questions {
		fmt.Fprintf(w, "%sclaude asks: %s\n", pre, q.Question)
		for i, o := range q.Options {
			fmt.Fprintf(w, "      %d. %s", i+1, o.Label)
			if o.Description != "" {
				fmt.Fprintf(w, ": %s", oneLine(o.Description, 100))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "      (answer with: kndl answer ID --option N, or kndl answer ID \"your words\")\n")
}

// choiceFlags collects --option N, each one answer in order.
type choiceFlags []api.Choice

func (c *choiceFlags) String() string { return fmt.Sprint(len(*c)) }

func (c *choiceFlags) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return fmt.Errorf("--option %q: want an option's number, from 1", v)
	}
	*c = append(*c, api.Choice{Option: n})
	return nil
}

// sessionAnswer answers the question Claude asks: each --option N, then
// each TEXT, answers its questions in order.
func sessionAnswer(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "answer")
	var choices choiceFlags
	fs.Var(&choices, "option", "answer with this option's number (repeat for each question)")
	question := fs.String("question", "", "the question's id (default: the one waiting)")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || (len(pos) == 1 && len(choices) == 0) {
		return ErrUsage
	}
	for _, t := range pos[1:] {
		choices = append(choices, api.Choice{Text: t})
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	if err := c.Answer(ctx, pos[0], api.Answer{QuestionID: *question, Answers: choices}); err != nil {
		return err
	}
	fmt.Fprintln(io.Stdout, "Answered: Claude carries on.")
	return nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func indentLines(s, pre string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// tokenSet stores the person's Claude setup token on the Hub, read from
// stdin (without echo on a terminal).
func tokenSet(ctx context.Context, io IO, args []string) error {
	if len(args) != 0 {
		return ErrUsage
	}
	var tok []byte
	var err error
	if f, ok := io.Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(io.Stderr, "Paste your setup token (claude setup-token makes one), then press Enter: ")
		tok, err = term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(io.Stderr)
	} else {
		tok, err = readAllLimited(io.Stdin, 8192)
	}
	if err != nil {
		return err
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	if err := c.SetClaudeToken(ctx, strings.TrimSpace(string(tok))); err != nil {
		return err
	}
	fmt.Fprintln(io.Stdout, "Stored. Your Sessions run on it from their next start or wake.")
	return nil
}

// sessionUpdate renames a Session or changes its model and effort (an awake
// Session restarts to take them).
func sessionUpdate(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "update")
	var req api.SessionUpdate
	fs.Func("title", "the Session's title", func(v string) error { req.Title = &v; return nil })
	fs.Func("model", "the model: an alias or id kndl models lists, or \"\" for the default", func(v string) error { req.Model = &v; return nil })
	fs.Func("effort", "one the model takes, as kndl models lists, or \"\" for the default", func(v string) error { req.Effort = &v; return nil })
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || (req.Title == nil && req.Model == nil && req.Effort == nil) {
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	s, err := c.UpdateSession(ctx, pos[0], req)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Session %s: %q, model %s, effort %s.\n", s.ID, s.Title, or(s.Model, "default"), or(s.Effort, "default"))
	return nil
}
