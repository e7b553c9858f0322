package runner

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/tmux"
)

// fakePane is Claude Code's input box behind a tmux control client, as the
// Runner drives it: Ctrl+G puts the staged prompt in the input, Enter
// submits it (firing UserPromptSubmit) unless the pane is told to lose it,
// and capture-pane draws the box.
type fakePane struct {
	mu     sync.Mutex
	staged string // the file the editor copies
	input  string
	// lose is how many Enters to lose, the box keeping the prompt;
	// unheard how many submits fire no hook.
	lose, unheard int
	// typed counts the times the editor put the prompt in, submitted the
	// prompts taken.
	typed     int
	submitted []string
	took      func(text string) // the UserPromptSubmit hook
	// editorTakes is how long the editor runs (ms), Claude Code showing
	// that it waits for it meanwhile, from editorFrom to editorUntil;
	// editorNext counts the editor keys taken while it ran, each running
	// it again editorGap after the last closed.
	editorTakes, editorNext int
	editorFrom, editorUntil time.Time
	// slowFor is how long after the first Enter Claude Code, slow on a
	// starved host, gets to it; enters counts the Enters pressed.
	slowFor    time.Duration
	firstEnter time.Time
	enters     int
	// hookAfter, if set, is when after Enter the UserPromptSubmit hook
	// reaches the Runner, Claude Code keeping the prompt in its input until
	// the hook's answer is back, answerTakes later.
	hookAfter, answerTakes time.Duration
	hooked                 time.Time
	// keyLag is how long after each key Claude Code, starved, gets to it,
	// in order (lagged holds those it has not got to); ignore is how many
	// editor keys it ignores, as it did right after an interrupt;
	// editorRuns counts the editor's runs at the keys it got to.
	keyLag     time.Duration
	lagged     []laggedKey
	ignore     int
	editorRuns int
	// drawLag is how long the box takes to show what the editor put in,
	// until drawn.
	drawLag time.Duration
	drawn   time.Time
}

// laggedKey is a key Claude Code gets to at due.
type laggedKey struct {
	due time.Time
	cmd string
}

// editorGap is how long Claude Code shows the input between two runs of
// its editor.
const editorGap = 100 * time.Millisecond

// editing reports whether the editor runs now, ending a run that is over
// (copying what is staged then) and scheduling the next one asked for;
// call with p.mu held.
func (p *fakePane) editing() bool {
	now := time.Now()
	for !p.editorUntil.IsZero() && now.After(p.editorUntil) {
		if b, err := os.ReadFile(p.staged); err == nil {
			p.input = string(b)
			p.typed++
		}
		ended := p.editorUntil
		p.editorFrom, p.editorUntil = time.Time{}, time.Time{}
		if p.editorNext > 0 {
			p.editorNext--
			p.editorFrom = ended.Add(editorGap)
			p.editorUntil = p.editorFrom.Add(time.Duration(p.editorTakes) * time.Millisecond)
		}
	}
	return !p.editorFrom.IsZero() && !now.Before(p.editorFrom)
}

// fakeSession is a running Session whose pane is a fakePane, on a Runner
// with nothing else.
func fakeSession(t *testing.T, p *fakePane) (*Runner, *session) {
	home := t.TempDir()
	r := &Runner{cfg: Config{Home: home}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), sessions: map[string]*session{},
		unheardWait: time.Second}
	s := r.newSession("s1")
	r.sessions[s.id] = s
	os.MkdirAll(filepath.Join(r.sessionDir(s.id), "mod"), 0o700)
	p.staged = filepath.Join(r.sessionDir(s.id), "mod", stagedPrompt)
	p.took = func(text string) {
		r.hook(context.Background(), s.id, fmt.Appendf(nil, `{"hook_event_name":"UserPromptSubmit","prompt":%q}`, text))
	}
	cmdR, cmdW := io.Pipe()
	outR, outW := io.Pipe()
	go p.serve(cmdR, outW)
	ctl, err := tmux.NewControl(cmdW, outR, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmdW.Close(); outW.Close() })
	s.ctl = ctl
	return r, s
}

// serve answers the control client's commands, as tmux does.
func (p *fakePane) serve(cmds io.Reader, out io.Writer) {
	io.WriteString(out, "%begin 0 0 0\n%end 0 0 0\n") // the client's own first command
	sc := bufio.NewScanner(cmds)
	for n := 1; sc.Scan(); n++ {
		reply := p.run(sc.Text())
		fmt.Fprintf(out, "%%begin %d %d 0\n%s%%end %d %d 0\n", n, n, reply, n, n)
	}
}

func (p *fakePane) run(cmd string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	rule := strings.Repeat("─", 40)
	running := p.editing()
	if p.slowFor > 0 && !p.firstEnter.IsZero() && time.Since(p.firstEnter) >= p.slowFor && p.input != "" {
		p.submit() // the first Enter, reached at last
	}
	if p.hookAfter > 0 && !p.firstEnter.IsZero() {
		if p.hooked.IsZero() && time.Since(p.firstEnter) >= p.hookAfter {
			p.hooked = time.Now()
			p.took(p.input) // reaches the Runner as it reads the screen
		}
		if !p.hooked.IsZero() && time.Since(p.hooked) >= p.answerTakes && p.input != "" {
			p.submitted = append(p.submitted, p.input)
			p.input = ""
		}
	}
	for len(p.lagged) > 0 && !time.Now().Before(p.lagged[0].due) {
		p.key(p.lagged[0].cmd, running)
		p.lagged = p.lagged[1:]
	}
	switch {
	case strings.HasPrefix(cmd, "capture-pane") && running:
		return "● earlier\n" + rule + "\n                    Save and close the editor to continue…\n" + rule + "\n"
	case strings.HasPrefix(cmd, "capture-pane") && time.Now().Before(p.drawn):
		return "● earlier\n" + rule + "\n❯ \n" + rule + "\n  ⏵⏵ bypass permissions on\n"
	case strings.HasPrefix(cmd, "capture-pane"):
		return "● earlier\n" + rule + "\n❯ " + p.input + "\n" + rule + "\n  ⏵⏵ bypass permissions on\n"
	case p.keyLag > 0:
		p.lagged = append(p.lagged, laggedKey{time.Now().Add(p.keyLag), cmd})
	default:
		p.key(cmd, running)
	}
	return ""
}

// key is Claude Code getting to a key; call with p.mu held.
func (p *fakePane) key(cmd string, running bool) {
	switch {
	case strings.HasSuffix(cmd, `"C-g"`) && p.ignore > 0:
		p.ignore--
	case strings.HasSuffix(cmd, `"C-g"`) && running:
		p.editorNext++
	case strings.HasSuffix(cmd, `"C-g"`) && !p.editorUntil.IsZero():
		p.editorNext++ // between two runs
	case strings.HasSuffix(cmd, `"C-g"`) && p.editorTakes > 0:
		p.editorFrom = time.Now()
		p.editorUntil = p.editorFrom.Add(time.Duration(p.editorTakes) * time.Millisecond)
	case strings.HasSuffix(cmd, `"C-g"`) && p.input != "":
		// Run again over the prompt, the editor changes it, whatever it
		// writes: Claude Code's long input (docs/claude-code.md).
		p.editorRuns++
		p.input = "<pasted_content>" + p.input + "</pasted_content>"
	case strings.HasSuffix(cmd, `"C-g"`):
		p.editorRuns++
		if b, err := os.ReadFile(p.staged); err == nil {
			p.input = string(b)
			p.typed++
			p.drawn = time.Now().Add(p.drawLag)
		}
	case strings.HasSuffix(cmd, `"Enter"`) && !p.editorFrom.IsZero():
		// Lost to the editor: keys are taken in order, so one run asked
		// for before this Enter starts first.
	case strings.HasSuffix(cmd, `"Enter"`):
		p.enters++
		if p.firstEnter.IsZero() {
			p.firstEnter = time.Now()
		}
		if p.lose > 0 {
			p.lose--
			return
		}
		if p.slowFor == 0 && p.hookAfter == 0 {
			p.submit()
		}
	}
}

// submit takes the input as Claude Code does at Enter; call with p.mu held.
func (p *fakePane) submit() {
	text := p.input
	p.input = ""
	p.submitted = append(p.submitted, text)
	if p.unheard > 0 {
		p.unheard--
		return
	}
	go p.took(text)
}

func (p *fakePane) counts() (typed int, submitted []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.typed, p.submitted
}

// deliverHello delivers "hello there", with 30 s to take it, to a Session
// whose pane is p; it fails the test unless the prompt is taken at try
// tries, and returns how long that took.
func deliverHello(t *testing.T, p *fakePane, tries int) time.Duration {
	t.Helper()
	_, s := fakeSession(t, p)
	start := time.Now()
	got, err := s.deliver(context.Background(), protocol.SessionDeliver{SessionID: "s1", PromptID: "p1", Text: "hello there", WithinMS: 30_000})
	if err != nil || !got.Taken || got.Tries != tries {
		t.Fatalf("deliver = %+v, %v; want taken at try %d", got, err, tries)
	}
	return time.Since(start)
}

// wantHelloOnceAbout fails the test unless "hello there" was typed once and
// submitted once, whole, taken (after took) within a second past after.
func wantHelloOnceAbout(t *testing.T, p *fakePane, took, after time.Duration) {
	t.Helper()
	if took < after || took > after+time.Second {
		t.Errorf("taken after %v, want just after %v", took, after)
	}
	if typed, submitted := p.counts(); typed != 1 || len(submitted) != 1 || submitted[0] != "hello there" {
		t.Fatalf("typed %d times, submitted %q; want one of each", typed, submitted)
	}
}

// TestALostEnterIsPressedAgainWithinASecond: Claude Code keeps the prompt
// in its input after an Enter; the Runner presses Enter again a second
// later, and answers taken once UserPromptSubmit fires, the prompt typed
// once.
func TestALostEnterIsPressedAgainWithinASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakePane{lose: 1}
		wantHelloOnceAbout(t, p, deliverHello(t, p, 1), resendAfter)
	})
}

// TestASlowClaudeCodeIsPressedEnterLessAndLess: Claude Code, starved, gets
// to an Enter 4.5 s after it; the Runner presses Enter again after 1 s,
// then 2 s more (not every second: each key is more for it to work
// through), and the prompt is taken once, at the first try.
func TestASlowClaudeCodeIsPressedEnterLessAndLess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakePane{slowFor: 4500 * time.Millisecond}
		deliverHello(t, p, 1)
		p.mu.Lock()
		enters, submitted := p.enters, p.submitted
		p.mu.Unlock()
		if enters != 3 || len(submitted) != 1 {
			t.Fatalf("Enter pressed %d times, submitted %q; want 3 presses (at 0, 1 and 3 s) and the prompt once", enters, submitted)
		}
	})
}

// TestTheFirstPromptIsEnteredOnceWhenItsHookComesAsTheScreenIsRead:
// Claude Code keeps the prompt in its input until its UserPromptSubmit
// hook has answered. A hook that reaches the Runner while it reads the
// screen, a second after Enter, took the prompt: the screen read just
// before still showing it is no lost Enter, and Enter is pressed once.
func TestTheFirstPromptIsEnteredOnceWhenItsHookComesAsTheScreenIsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakePane{hookAfter: resendAfter, answerTakes: 50 * time.Millisecond}
		deliverHello(t, p, 1)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.enters != 1 || p.typed != 1 {
			t.Fatalf("Enter pressed %d times, the prompt typed %d; want once each", p.enters, p.typed)
		}
	})
}

// TestASlowEditorIsNotOpenedTwice: Claude Code's editor takes longer than
// the Runner's wait for the input to show the prompt, as on a loaded host
// (5 Sessions started at once, 2 cores); the Runner presses no editor key
// while it runs, which would run it again and lose the Enter to it, and the
// prompt is taken at the first try.
func TestASlowEditorIsNotOpenedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakePane{editorTakes: 1200}
		if took := deliverHello(t, p, 1); took > 2*time.Second {
			t.Errorf("taken after %v, want soon after the editor's 1.2 s", took)
		}
		if typed, submitted := p.counts(); typed != 1 || len(submitted) != 1 {
			t.Fatalf("the editor put the prompt in %d times, submitted %q; want once each", typed, submitted)
		}
	})
}

// TestAnEditorKeyClaudeCodeGetsToLateIsPressedOnce: a starved Claude Code
// gets to each key 0.8 s after it (as at load 4 to 16), and may take
// longer than pressAgainAfter to draw the prompt its editor put in; an
// editor key pressed again meanwhile would run the editor over the prompt,
// which changes a long one. The Runner presses the key once, and the
// prompt is taken whole.
func TestAnEditorKeyClaudeCodeGetsToLateIsPressedOnce(t *testing.T) {
	for _, drawLag := range []time.Duration{0, pressAgainAfter + time.Second} {
		t.Run(fmt.Sprintf("drawn %v after the editor ran", drawLag), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &fakePane{keyLag: 800 * time.Millisecond, drawLag: drawLag}
				_, s := fakeSession(t, p)
				text := strings.Repeat("a long\tprompt\n", 4<<10)
				got, err := s.deliver(context.Background(), protocol.SessionDeliver{SessionID: "s1", PromptID: "p1", Text: text, WithinMS: 30_000})
				if err != nil || !got.Taken || got.Tries != 1 {
					t.Fatalf("deliver = %+v, %v; want taken at the first try", got, err)
				}
				p.mu.Lock()
				defer p.mu.Unlock()
				if p.editorRuns != 1 || len(p.submitted) != 1 || p.submitted[0] != text {
					t.Fatalf("the editor ran %d times, and %d prompts were submitted (the first whole: %v); want one run and the prompt whole",
						p.editorRuns, len(p.submitted), len(p.submitted) > 0 && p.submitted[0] == text)
				}
			})
		})
	}
}

// TestAnIgnoredEditorKeyIsPressedAgain: Claude Code ignores the first
// editor key (as right after an interrupt); its editor not having run
// pressAgainAfter later, the Runner presses it again, and the prompt is
// taken at the first try.
func TestAnIgnoredEditorKeyIsPressedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakePane{ignore: 1}
		wantHelloOnceAbout(t, p, deliverHello(t, p, 1), pressAgainAfter)
	})
}

// TestAPromptSubmittedUnheardIsTypedAgain: Claude Code's input emptied at
// Enter but no UserPromptSubmit came (nor the transcript); after
// unheardWait (1 s here) the Runner types the prompt again, and answers
// taken at the hook of that second try, without the Hub.
func TestAPromptSubmittedUnheardIsTypedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakePane{unheard: 1}
		deliverHello(t, p, 2)
		if typed, _ := p.counts(); typed != 2 {
			t.Fatalf("typed %d times, want 2", typed)
		}
	})
}

// TestAPromptNeverTakenIsAnsweredNotTakenAtItsDeadline: every Enter is
// lost; the Runner keeps pressing it until the time the Hub gave is over,
// then answers not taken, saying why, without an error.
func TestAPromptNeverTakenIsAnsweredNotTakenAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakePane{lose: 1 << 20}
		_, s := fakeSession(t, p)
		start := time.Now()
		got, err := s.deliver(context.Background(), protocol.SessionDeliver{SessionID: "s1", PromptID: "p1", Text: "hello there", WithinMS: 2500})
		if err != nil || got.Taken || !strings.Contains(got.Why, "not taken") {
			t.Fatalf("deliver = %+v, %v; want not taken, saying why", got, err)
		}
		if took := time.Since(start); took < 2500*time.Millisecond || took > 4*time.Second {
			t.Errorf("answered after %v, want at the deadline, 2.5 s", took)
		}
	})
}

// TestACommandIsTakenOnceItsInputEmpties: a slash command fires no
// UserPromptSubmit: its input emptying at Enter is Claude Code taking it.
func TestACommandIsTakenOnceItsInputEmpties(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &fakePane{unheard: 1}
		_, s := fakeSession(t, p)
		got, err := s.deliver(context.Background(), protocol.SessionDeliver{SessionID: "s1", PromptID: "p1", Text: "/compact", Command: true, WithinMS: 30_000})
		if err != nil || !got.Taken || got.Tries != 1 {
			t.Fatalf("deliver = %+v, %v; want taken at once", got, err)
		}
	})
}
