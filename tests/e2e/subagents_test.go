package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// toolUse returns the Session's tool_use Event of a tool whose input holds
// s.
func toolUse(evs []protocol.Event, tool, s string) (protocol.Event, bool) {
	for _, e := range evs {
		if e.Kind == protocol.EventToolUse && e.Tool == tool && strings.Contains(string(e.Input), s) {
			return e, true
		}
	}
	return protocol.Event{}, false
}

// after waits for an Event that match accepts past seq.
func (s *System) after(id string, seq int64, what string, match func(protocol.Event) bool) protocol.Event {
	s.t.Helper()
	return s.WaitEvent(id, testenv.WaitMedium, what, func(e protocol.Event) bool { return e.Seq > seq && match(e) })
}

// TestASubagentStoppedFromTheCLIEndsWhileTheMainTurnGoesOn: a subagent the
// model starts is named under its Agent call and listed by kndl show as
// running; kndl stop-subagent stops it at its next tool call, while the
// main Turn runs a long command, which runs on to its end (the test ends
// it once the subagent has); the transcript says it stopped, it makes no
// more calls, kndl show lists it stopped and refuses a second stop, and
// the conversation answers the next prompt.
func TestASubagentStoppedFromTheCLIEndsWhileTheMainTurnGoesOn(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.Ready("warm up first", "Ready.")
	s.Model.On(testkit.InSubagent("HELPER-ONE"), testkit.Bash("echo helper-step").Slow(300*time.Millisecond, 0))
	s.Model.On(testkit.PromptContains("start a helper"), testkit.Agent("Count slowly", "HELPER-ONE: count slowly, one step at a time"))
	s.Model.On(testkit.ToolResultContains("Async agent launched"), testkit.Bash("echo main-start; "+untilTouched("/tmp/main-goes-on")+"; echo main-done"))
	s.Model.On(testkit.ToolResultContains("main-done"), testkit.Text("The main Turn went on."))
	s.Model.On(testkit.PromptContains("<task-notification>"), testkit.Text("Noted the helper's end."))
	s.Model.On(testkit.PromptContains("are you still there"), testkit.Text("Still here, after the stop."))

	s.prompt(v.ID, "start a helper")
	start := s.WaitEvent(v.ID, testenv.WaitMedium, "the subagent's start", kind(protocol.EventSubagentStart))
	call, _ := toolUse(s.Events(v.ID), "Agent", "HELPER-ONE")
	if start.Parent == "" || start.Parent != call.ToolID || start.Text != "general-purpose" {
		t.Fatalf("subagent_start %+v, want its type under the Agent call %q", start, call.ToolID)
	}
	s.WaitEvent(v.ID, testenv.WaitMedium, "a tool call of the subagent's", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolUse && e.Agent == start.Agent && e.Parent == call.ToolID
	})
	s.WaitEvent(v.ID, testenv.WaitMedium, "the main Turn's long command", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolUse && e.Agent == "" && strings.Contains(string(e.Input), "main-start")
	})
	out, errOut, code := s.kndl("", "show", v.ID)
	if code != 0 || !strings.Contains(out, "Subagents:") || !listed(out, start.Agent, "general-purpose", "running", "Count slowly") {
		t.Fatalf("kndl show: exit %d, want the subagent running\n%s\n%s", code, out, errOut)
	}

	if out, errOut, code := s.kndl("", "stop-subagent", v.ID, start.Agent); code != 0 || !strings.Contains(out, "it stops at its next tool call") {
		t.Fatalf("kndl stop-subagent: exit %d\n%s\n%s", code, out, errOut)
	}
	end := s.WaitEvent(v.ID, testenv.WaitMedium, "the subagent's end", func(e protocol.Event) bool {
		return e.Kind == protocol.EventSubagentEnd && e.Agent == start.Agent
	})
	if end.Reason != protocol.SubagentStopped || end.Parent != call.ToolID || end.Text != "Stopped by its Creator." {
		t.Fatalf("subagent_end %+v, want stopped, under its call, by its Creator", end)
	}
	s.inSandbox(v.ID, "touch /tmp/main-goes-on") // the main Turn's command ends once the subagent has
	done := s.after(v.ID, end.Seq, "the main Turn's answer", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "The main Turn went on."
	})
	turnEnd := s.after(v.ID, done.Seq, "the main Turn's end", func(e protocol.Event) bool { return e.Kind == protocol.EventTurnEnd && e.Agent == "" })
	evs := s.Events(v.ID)
	if r := toolResult(evs, "Bash"); !strings.Contains(r, "main-start\nmain-done") {
		t.Fatalf("the main Turn's command gave %q, want it run to its end", r)
	}
	for _, e := range evs {
		switch {
		case e.Kind == protocol.EventTurnEnd && e.Seq > start.Seq && e.Seq < done.Seq:
			t.Fatalf("a Turn ended between the subagent's start and the main Turn's answer: %+v\n%s", e, dump(evs))
		case e.Kind == protocol.EventToolUse && e.Agent == start.Agent && e.Seq > end.Seq:
			t.Fatalf("the stopped subagent called a tool after its end: %+v", e)
		}
	}
	if turnEnd.Reason != "done" {
		t.Fatalf("the main Turn ended %q, want done", turnEnd.Reason)
	}
	once(t, evs, protocol.EventSubagentStop, "Its Creator asked it to stop: it stops at its next tool call.")

	out, errOut, code = s.kndl("", "show", v.ID)
	if code != 0 || !listed(out, start.Agent, "general-purpose", "stopped", "Count slowly") || !strings.Contains(out, "-- subagent "+start.Agent+" stopped") {
		t.Fatalf("kndl show after the stop: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.kndl("", "stop-subagent", v.ID, start.Agent); code != 1 || !strings.Contains(errOut, "is not running") {
		t.Fatalf("a second stop: exit %d\n%s\n%s; want it refused, not running", code, out, errOut)
	}

	s.prompt(v.ID, "are you still there?")
	s.after(v.ID, turnEnd.Seq, "the next prompt's answer", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Still here, after the stop."
	})
}

// listed reports whether kndl show's Subagents list has a row for agent
// with its type, state and description.
func listed(out, agent, typ, state, description string) bool {
	_, list, _ := strings.Cut(out, "\nSubagents:\n")
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == agent && f[1] == typ && f[2] == state && strings.Join(f[3:], " ") == description {
			return true
		}
	}
	return false
}

// TestTheSessionViewListsSubagentsAndItsCreatorStopsOne: the Session view
// lists each subagent with its type, its description and whether it runs,
// live; the Creator's has a Stop button by the running one alone, a
// watcher's has none and the API refuses them; each subagent's transcript
// is nested under the Agent call that started it; the Creator's Stop ends
// the subagent, which both pages show stopped, and the conversation
// answers the next prompt.
func TestTheSessionViewListsSubagentsAndItsCreatorStopsOne(t *testing.T) {
	t.Parallel()
	s := Start(t, WithGitHub())
	repo := s.GitHubRepo("acme/app")
	s.GitHub.SetCollaborator("acme/app", "bob", true)
	s.Model.On(func(r *testkit.Request) bool {
		return testkit.InSubagent("HELPER-QUICK")(r) && testkit.AfterToolResult()(r)
	}, testkit.Text("Quick helper done."))
	s.Model.On(testkit.InSubagent("HELPER-QUICK"), testkit.Bash("echo quick-step"))
	s.Model.On(testkit.InSubagent("HELPER-SLOW"), testkit.Bash("echo slow-step").Slow(400*time.Millisecond, 0))
	s.Model.On(testkit.PromptContains("start two helpers"), testkit.Agent("Count slowly", "HELPER-SLOW: count slowly, one step at a time").
		Then(testkit.Agent("Finish quickly", "HELPER-QUICK: one step, then done")))
	s.Model.On(testkit.ToolResultContains("Async agent launched"), testkit.Text("Two helpers run."))
	s.Model.On(testkit.PromptContains("<task-notification>"), testkit.Text("Noted a helper's end."))
	s.Model.On(testkit.PromptContains("are you still there"), testkit.Text("Still here, after the stop."))
	v := s.NewSession(repo, "start two helpers")
	quickEnd := s.WaitEvent(v.ID, testenv.WaitBuild, "the quick helper's end", func(e protocol.Event) bool {
		return e.Kind == protocol.EventSubagentEnd && e.Reason == ""
	})
	evs := s.Events(v.ID)
	slowCall, _ := toolUse(evs, "Agent", "HELPER-SLOW")
	quickCall, _ := toolUse(evs, "Agent", "HELPER-QUICK")
	slow := s.WaitEvent(v.ID, testenv.WaitMedium, "the slow helper's start", func(e protocol.Event) bool {
		return e.Kind == protocol.EventSubagentStart && e.Parent == slowCall.ToolID
	})
	if quickEnd.Parent != quickCall.ToolID {
		t.Fatalf("the quick helper's end %+v, want it under its call %s", quickEnd, quickCall.ToolID)
	}
	// Its start comes first, whenever its call's hook came: a page that
	// read the end first would list it running for good.
	if start, ok := findEvent(evs, func(e protocol.Event) bool { return e.Kind == protocol.EventSubagentStart && e.Agent == quickEnd.Agent }); !ok || start.Seq > quickEnd.Seq {
		t.Fatalf("the quick helper's start %+v (found %v), want it before its end %+v", start, ok, quickEnd)
	}
	s.WaitEvent(v.ID, testenv.WaitMedium, "a tool call of the slow helper's", func(e protocol.Event) bool {
		return e.Kind == protocol.EventToolUse && e.Agent == slow.Agent
	})

	rows := `[...document.querySelectorAll("#subagents li")].map(li => [li.dataset.agent, li.querySelector(".agent-type").textContent,
		li.querySelector(".agent-desc").textContent, li.querySelector(".agent-state").textContent, !!li.querySelector("[data-action=stop-subagent]")].join("|"))`
	slowRunning := slow.Agent + "|general-purpose|Count slowly|running|"
	creator := NewBrowser(t)
	s.SignInDev(creator)
	creator.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	creator.Wait(testenv.WaitMedium, "both helpers listed, a Stop by the running one alone", `(() => { const r = `+rows+`;
		return r.length === 2 && r.includes("`+slowRunning+`true") && r.includes("`+quickEnd.Agent+`|general-purpose|Finish quickly|finished|false") })()`)
	// Each helper's own tool calls are nested under the Agent call that
	// started it, not at the top of the transcript.
	creator.Wait(testenv.WaitShort, "the helpers' transcripts under their calls", `(() => {
		const calls = [...document.querySelectorAll("#transcript > .ev.tool")].filter(li => li.querySelector(".tool-name").textContent === "Agent");
		const nested = (desc, cmd) => calls.some(li => li.querySelector(".tool-summary").textContent === desc &&
			[...li.querySelectorAll(".children .ev.tool .tool-summary")].some(x => x.textContent === cmd));
		const top = [...document.querySelectorAll("#transcript > .ev.tool > details > summary > .tool-summary")].some(x => x.textContent.endsWith("-step"));
		const topNote = [...document.querySelectorAll("#transcript > .ev.note")].some(x => x.textContent.startsWith("Subagent"));
		return nested("Count slowly", "echo slow-step") && nested("Finish quickly", "echo quick-step") && !top && !topNote })()`)
	creator.Screenshot("session-subagents.png")

	bob := NewBrowser(t)
	s.Member(bob, "bob")
	bob.Go(s.URL+"/sessions/"+v.ID, "#transcript")
	bob.Wait(testenv.WaitMedium, "the watcher's list, without a Stop", `(() => { const r = `+rows+`; return r.length === 2 && r.includes("`+slowRunning+`false") })()`)
	status := Eval[float64](bob, `fetch("/api/sessions/`+v.ID+`/subagents/`+slow.Agent+`/stop", {method: "POST"}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Fatalf("the watcher's stop: %v, want 403", status)
	}

	Eval[bool](creator, `(() => { document.querySelector('#subagents li[data-agent="`+slow.Agent+`"] [data-action=stop-subagent]').click(); return true })()`)
	end := s.WaitEvent(v.ID, testenv.WaitMedium, "the slow helper's end", func(e protocol.Event) bool {
		return e.Kind == protocol.EventSubagentEnd && e.Agent == slow.Agent
	})
	if end.Reason != protocol.SubagentStopped {
		t.Fatalf("the slow helper ended %+v, want stopped", end)
	}
	for _, b := range []*Browser{creator, bob} {
		b.Wait(testenv.WaitShort, "the slow helper shown stopped, with no Stop", `(() => { const r = `+rows+`; return r.includes("`+slow.Agent+`|general-purpose|Count slowly|stopped|false") })()`)
	}
	creator.Wait(testenv.WaitShort, "its end in its transcript, under its call", `[...document.querySelectorAll("#transcript > .ev.tool .children .ev.note.stopped")].some(x => x.textContent === "Subagent stopped")`)
	// Its description opens the Agent call its transcript is under.
	Eval[bool](creator, `(() => { document.querySelector('#subagents li[data-agent="`+slow.Agent+`"] [data-action=show-subagent]').click(); return true })()`)
	creator.Wait(testenv.WaitShort, "its Agent call open", `[...document.querySelectorAll("#transcript > .ev.tool > details[open] > summary > .tool-summary")].some(x => x.textContent === "Count slowly")`)
	creator.Screenshot("session-subagents-stopped.png")

	// The conversation goes on once the helpers' notifications are taken.
	note := s.after(v.ID, end.Seq, "the slow helper's notification", func(e protocol.Event) bool {
		return e.Kind == protocol.EventNote && e.Parent == slowCall.ToolID
	})
	idle := s.after(v.ID, note.Seq, "the notification's Turn to end", func(e protocol.Event) bool { return e.Kind == protocol.EventTurnEnd && e.Agent == "" })
	s.prompt(v.ID, "are you still there?")
	s.after(v.ID, idle.Seq, "the next prompt's answer", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && e.Text == "Still here, after the stop."
	})
	creator.Wait(testenv.WaitShort, "the answer on the page", `document.querySelector("#transcript").textContent.includes("Still here, after the stop.")`)
}
