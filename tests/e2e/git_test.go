package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// pushScript is what the scripted model runs in the Sandbox: a branch of
// the Session's own (ownBranch), pushed with nothing but the Sandbox's own
// git setup, through the Runner's git relay.
const pushScript = "git config --global user.email claude@example.com && git config --global user.name Claude && " +
	"git checkout -b kndl/${KNDL_SESSION_ID:0:8}/x && git commit --allow-empty -m x && git push -u origin HEAD"

// ghScript is what the scripted model runs to open the pull request of
// pushScript's branch with gh, then to reach gists.
const ghScript = `cd /workspace && gh pr create --title "From the Sandbox" --body b --head kndl/${KNDL_SESSION_ID:0:8}/x --base main 2>&1; gh api gists 2>&1`

// ghReadScript is what the scripted model runs to read, with gh, the pull
// request of its branch and its checks, issue #2 and Actions run 1000.
const ghReadScript = `cd /workspace && gh pr view 2>&1; gh pr checks 2>&1; gh issue view 2 2>&1; gh run view 1000 2>&1`

// lastToolResult is the text of the last tool result in events.
func lastToolResult(events []protocol.Event) string {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Kind == protocol.EventToolResult {
			return events[i].Text
		}
	}
	return ""
}

// ownBranch is the branch pushScript pushes: under the Session's prefix.
func ownBranch(id string) string { return "kndl/" + id[:8] + "/x" }

// forgeTokens are the Session tokens for git the fake minted, oldest
// first: those with contents write (the host clone's has contents read,
// the Hub's own for pull requests none).
func (s *System) forgeTokens() []string {
	var out []string
	for _, tok := range s.GitHub.Tokens() {
		if info, _ := s.GitHub.Token(tok); info.Permissions["contents"] == "write" {
			out = append(out, tok)
		}
	}
	return out
}

// forgeToken is the newest of forgeTokens: the one the Runner's git relay
// holds now, for a test with one Session.
func (s *System) forgeToken() string {
	s.t.Helper()
	toks := s.forgeTokens()
	if len(toks) == 0 {
		s.t.Fatal("the fake GitHub minted no token for a Session's git")
	}
	return toks[len(toks)-1]
}

// gitAsClaude runs git in the Sandbox's /workspace as a tool of Claude
// Code's would: with its Session token, read from Claude Code's process.
func (s *System) gitAsClaude(id string, args ...string) (string, int) {
	s.t.Helper()
	const find = `for f in /proc/[0-9]*/environ; do t=$(tr '\0' '\n' < "$f" 2>/dev/null | sed -n 's/^KNDL_MOD_TOKEN=//p'); [ -n "$t" ] && break; done; ` +
		`KNDL_MOD_TOKEN="$t" exec git -C /workspace "$@"`
	return s.Exec(id, append([]string{"sh", "-c", find, "git"}, args...)...)
}

// gitSession starts a Session on acme/app, served by the fake GitHub, whose
// first Turn runs pushScript, and waits for that Turn's end.
func (s *System) gitSession() string {
	s.t.Helper()
	repo := s.GitHubRepo("acme/app")
	s.Model.On(testkit.PromptContains("push a branch"), testkit.Bash(pushScript))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("Pushed."))
	v := s.NewSession(repo, "push a branch")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the answer", func(e protocol.Event) bool { return e.Kind == protocol.EventText && e.Text == "Pushed." })
	return v.ID
}

// TestSandboxPushesItsOwnBranchThroughTheGitRelayAndIsRefusedMain: git in
// the Sandbox pushes the Session's own branch through the Runner's git
// relay, which holds the GitHub token; a push to main is refused with the
// line naming the branch to use; the Hub lists the pushed branch from the
// relay's word, not from a push line printed by hand; gh in the Sandbox
// opens the branch's pull request through the relay and is refused gists,
// and reads it, its checks, an issue and an Actions run; the relay's token
// is refreshed, the previous one revoked, and pushes go on; at sleep the
// current one is revoked.
func TestSandboxPushesItsOwnBranchThroughTheGitRelayAndIsRefusedMain(t *testing.T) {
	t.Parallel()
	s := Start(t, WithSandboxGitHub(time.Minute))
	// A short life, so the Runner refreshes within the test: at three
	// quarters of it, 9 s, past the Turns below. The previous token is
	// revoked 1 s later (the Hub's SandboxTokenGrace), still 2 s before
	// its expiry, which the test checks.
	s.GitHub.SetTokenLifetime(12 * time.Second)
	id := s.gitSession()
	own := ownBranch(id)
	if got := s.GitHub.Branches(t, "acme/app"); !slices.Contains(got, own) {
		t.Fatalf("the fake GitHub's branches: %v, want %s pushed from the Sandbox\nevents:\n%s", got, own, dump(s.Events(id)))
	}
	tok := s.forgeToken()
	info, _ := s.GitHub.Token(tok)
	if !slices.Equal(info.Repos, []string{"app"}) || info.Permissions["contents"] != "write" {
		t.Errorf("the relay's token: %+v, want one for acme/app alone with contents write", info)
	}

	out, code := s.gitAsClaude(id, "push", "origin", "HEAD:main")
	if want := "remote: kndl: this Session pushes only to new branches under kndl/" + id[:8] + "/"; code == 0 || !strings.Contains(out, want) || !strings.Contains(out, "! [remote rejected] HEAD -> main") {
		t.Errorf("a push to main: exit %d\n%s\nwant it refused with %q", code, out, want)
	}

	// A push line printed by hand records nothing.
	s.Model.On(testkit.PromptContains("claim a branch"), testkit.Bash(`echo " * [new branch]      kndl/claimed -> kndl/claimed"`))
	s.prompt(id, "claim a branch")
	s.turnEnds(id, 2)
	var v api.SessionView
	s.Do(http.MethodGet, "/api/sessions/"+id, nil, &v)
	if len(v.Branches) != 1 || v.Branches[0].Name != own {
		t.Errorf("the Session's branches: %+v, want %s alone, from the relay", v.Branches, own)
	}

	// gh, as Claude runs it, with nothing but what the Runner set up:
	// GH_HOST, GH_TOKEN (the Session token), the hosts file and port 80
	// of the relay's address, and the remote gh recognises. It opens the
	// pull request of the Session's branch; gists are refused with the
	// relay's message.
	s.Model.On(testkit.PromptContains("open a pull request"), testkit.Bash(ghScript))
	s.prompt(id, "open a pull request")
	s.turnEnds(id, 3)
	if pulls := s.GitHub.Pulls("acme/app"); len(pulls) != 1 || pulls[0].Head != own || pulls[0].Base != "main" || pulls[0].Title != "From the Sandbox" {
		t.Errorf("the fake GitHub's pull requests: %+v, want one from %s, opened by gh in the Sandbox\nevents:\n%s", pulls, own, dump(s.Events(id)))
	}
	ghOut := lastToolResult(s.Events(id))
	if want := "gh: kndl: this Session reaches GitHub's API for acme/app alone"; !strings.Contains(ghOut, "/acme/app/pull/1") || !strings.Contains(ghOut, want) {
		t.Errorf("gh in the Sandbox printed:\n%s\nwant the pull request's URL, then gh api gists refused with %q", ghOut, want)
	}

	// gh reads what its allowlist names: the pull request and its checks,
	// an issue, an Actions run.
	s.GitHub.AddCheckRun(t, "acme/app", 1, "test", "completed", "failure")
	s.GitHub.OpenIssue("acme/app", "octocat", "Crash on start", "It crashes.")
	s.GitHub.AddWorkflowRun("acme/app", "CI", own, strings.Repeat("a", 40), "failure")
	s.Model.On(testkit.PromptContains("read with gh"), testkit.Bash(ghReadScript))
	s.prompt(id, "read with gh")
	s.turnEnds(id, 4)
	ghOut = lastToolResult(s.Events(id))
	for _, want := range []string{"title:\tFrom the Sandbox", "test\tfail\t", "title:\tCrash on start", "X " + own + " CI · 1000"} {
		if !strings.Contains(ghOut, want) {
			t.Errorf("gh pr view, pr checks, issue view and run view in the Sandbox printed:\n%s\nwant a line with %q", ghOut, want)
		}
	}

	// The refresh: a new token in the relay, the previous one revoked at
	// GitHub before its expiry, and pushes go on.
	var fresh string
	testenv.Eventually(t, 30*time.Second, "a refreshed token", func() bool {
		fresh = s.forgeToken()
		return fresh != tok
	})
	testenv.Eventually(t, 10*time.Second, "the previous token revoked", func() bool { return revokedAt(s, tok) != time.Time{} })
	if at := revokedAt(s, tok); !at.Before(info.Expires) {
		t.Errorf("the previous token was revoked at %s, not before its expiry at %s", at, info.Expires)
	}
	if out, code := s.gitAsClaude(id, "push", "origin", "HEAD:kndl/"+id[:8]+"/after-refresh"); code != 0 {
		t.Errorf("a push after the refresh failed: %s", out)
	}

	// Asleep, the Session needs no token: its current one is revoked.
	s.Do(http.MethodPost, "/api/sessions/"+id+"/sleep", nil, nil)
	s.waitState(id, api.Asleep)
	testenv.Eventually(t, 10*time.Second, "the current token revoked at sleep", func() bool { return revokedAt(s, s.forgeToken()) != time.Time{} })
}

// revokedAt is when the fake GitHub revoked an installation token; zero if
// it did not.
func revokedAt(s *System, tok string) time.Time {
	info, _ := s.GitHub.Token(tok)
	return info.Revoked
}

// TestNoGitHubTokenIsInTheSandbox: once git in the Sandbox has pushed
// through the relay, no token the fake GitHub minted is in any process's
// environment or command line on the host (every Sandbox's processes
// included), in any file of the Hub's, the Runner's or the Sandbox's,
// its tmpfs included, nor in their logs, nor in the memory of any Sandbox
// process; the Sandbox's own search of its processes and files finds none
// either. The Runner's memory alone holds it.
func TestNoGitHubTokenIsInTheSandbox(t *testing.T) {
	t.Parallel()
	s := Start(t, WithSandboxGitHub(time.Minute))
	id := s.gitSession()
	var toks [][]byte
	for _, tok := range s.GitHub.Tokens() {
		toks = append(toks, []byte(tok))
	}
	if len(toks) == 0 {
		t.Fatal("the fake GitHub minted no token")
	}
	holds := func(b []byte) bool {
		return slices.ContainsFunc(toks, func(tok []byte) bool { return bytes.Contains(b, tok) })
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		for _, f := range []string{"environ", "cmdline"} {
			if b, _ := os.ReadFile(filepath.Join(p, f)); holds(b) {
				t.Errorf("%s/%s holds a GitHub token: %q", p, f, b)
			}
		}
	}
	if holds([]byte(s.logText())) {
		t.Error("the Hub's or the Runner's log holds a GitHub token")
	}
	// One search for the tokens and, to show it finds what is there, the
	// Session's id, in its processes' environment.
	pids, found := sandboxMemoryHolding(t, holds, func(b []byte) bool { return bytes.Contains(b, []byte(id)) })
	if len(pids) == 0 {
		t.Error("no process in another PID namespace than this test's to search the memory of: the Sandbox's are not where this test looks")
	} else if len(found[0]) > 0 {
		t.Errorf("the memory of Sandbox processes holds a GitHub token: %v", found[0])
	}
	if len(found[1]) == 0 {
		t.Error("the memory search finds not even the Session's id: it proves nothing")
	}
	scanned := 0
	for _, root := range []string{filepath.Dir(s.Home), "/var/lib/kndl", "/run/crun"} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			scanned++
			if b, _ := os.ReadFile(path); holds(b) {
				t.Errorf("%s holds a GitHub token", path)
			}
			return nil
		})
	}
	if scanned < 100 {
		t.Fatalf("scanned %d files: the Hub's and the Runner's state are not where this test looks", scanned)
	}
	var pattern []string
	for _, tok := range toks {
		pattern = append(pattern, "-e", string(tok))
	}
	out, _ := s.Exec(id, append([]string{"grep", "-rlsF", "--exclude-dir=proc", "--exclude-dir=sys", "--exclude-dir=dev"}, append(pattern, "/")...)...)
	if strings.TrimSpace(out) != "" {
		t.Errorf("files in the Sandbox hold a GitHub token:\n%s", out)
	}
	// Read out, and searched here: a search in the Sandbox would find its
	// own command line.
	out, _ = s.Exec(id, "sh", "-c", "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null")
	if len(out) < 100 || holds([]byte(out)) {
		t.Errorf("the Sandbox's processes' environments and command lines (%d bytes) hold a GitHub token", len(out))
	}
}

// sandboxMemoryHolding reads, from the host, every readable mapping of
// each process in a PID namespace other than this test's (the Sandboxes';
// the Runner is this process and holds the token by design), once for all
// of holds, and returns the processes searched and, for each of holds, the
// mappings whose memory it reports true of. Of a private mapping it reads
// the pages that are the process's own, those pagemap shows present or
// swapped and not the file's (ownPages): any other reads as zeros or, in a
// file's mapping, as that file, which the test's file searches read (a
// deleted file's mapping is read whole). Claude Code reserves about 5.5 GB
// it never touches, which read whole took 10 s a process; the Sandbox's
// file mappings, 400 MB with its binary, read whole took 2.8 s.
func sandboxMemoryHolding(t *testing.T, holds ...func([]byte) bool) (searched []string, found [][]string) {
	t.Helper()
	ours, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	found = make([][]string, len(holds))
	buf := make([]byte, memChunk)
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if ns, err := os.Readlink(filepath.Join(p, "ns/pid")); err != nil || ns == ours {
			continue
		}
		maps, err := os.ReadFile(filepath.Join(p, "maps"))
		mem, err2 := os.Open(filepath.Join(p, "mem"))
		pagemap, err3 := os.Open(filepath.Join(p, "pagemap"))
		if err != nil || err2 != nil || err3 != nil {
			continue // gone since the glob
		}
		searched = append(searched, p)
		for _, line := range strings.Split(string(maps), "\n") {
			var lo, hi, offset uint64
			var perms, dev string
			var inode int
			if n, _ := fmt.Sscanf(line, "%x-%x %s %x %s %d", &lo, &hi, &perms, &offset, &dev, &inode); n != 6 || perms[0] != 'r' {
				continue
			}
			runs := [][2]uint64{{lo, hi}}
			if perms[3] == 'p' && !strings.HasSuffix(line, " (deleted)") {
				runs = ownPages(pagemap, lo, hi)
			}
			held := make([]bool, len(holds))
			for _, r := range runs {
				if memHolding(mem, buf, r[0], r[1], holds, held) {
					break
				}
			}
			for i, h := range held {
				if h {
					found[i] = append(found[i], p+" "+line)
				}
			}
		}
		mem.Close()
		pagemap.Close()
	}
	return searched, found
}

// memChunk is how much of a process's memory a search reads at a time.
const memChunk = 4 << 20

// memHolding reads mem from lo to hi into buf (memChunk long) in chunks
// that overlap by more than a token's length, and sets held[i] once
// holds[i] is true of one; it reports whether all of held are set.
func memHolding(mem *os.File, buf []byte, lo, hi uint64, holds []func([]byte) bool, held []bool) bool {
	const overlap = 512
	for at := lo; at < hi; at += memChunk - overlap {
		n, _ := mem.ReadAt(buf[:min(memChunk, hi-at)], int64(at))
		all := true
		for i, h := range holds {
			held[i] = held[i] || n > 0 && h(buf[:n])
			all = all && held[i]
		}
		if all {
			return true
		}
		if n <= overlap {
			return false
		}
	}
	return false
}

// memHolds reports whether holds is true of some of mem from lo to hi.
func memHolds(mem *os.File, lo, hi uint64, holds func([]byte) bool) bool {
	held := []bool{false}
	memHolding(mem, make([]byte, memChunk), lo, hi, []func([]byte) bool{holds}, held)
	return held[0]
}

// ownPages returns the runs of pages from lo to hi that are a process's
// own: those its pagemap shows present (bit 63 of each page's entry) and
// not a file's page (bit 61: a page of a file's mapping not written since),
// or swapped (bit 62). A pagemap it cannot read gives the whole range.
func ownPages(pagemap *os.File, lo, hi uint64) [][2]uint64 {
	page := uint64(os.Getpagesize())
	var runs [][2]uint64
	buf := make([]byte, 8<<16)
	for at := lo; at < hi; {
		n, err := pagemap.ReadAt(buf[:min(uint64(len(buf)), (hi-at)/page*8)], int64(at/page*8))
		if n < 8 {
			if err != nil && len(runs) == 0 && at == lo {
				return [][2]uint64{{lo, hi}}
			}
			break
		}
		for i := 0; i+8 <= n; i, at = i+8, at+page {
			// little-endian: bits 63, 62 and 61 top the last byte
			if present, swapped, file := buf[i+7]&0x80 != 0, buf[i+7]&0x40 != 0, buf[i+7]&0x20 != 0; !(present && !file || swapped) {
				continue
			}
			if k := len(runs) - 1; k >= 0 && runs[k][1] == at {
				runs[k][1] += page
			} else {
				runs = append(runs, [2]uint64{at, at + page})
			}
		}
	}
	return runs
}

// TestTheCurrentAndPreviousSandboxTokensAreMasked: after a refresh, both
// the token the git relay holds and the one it held before show as *s in
// the transcript (tool input and output, Claude's text) and the terminal.
func TestTheCurrentAndPreviousSandboxTokensAreMasked(t *testing.T) {
	t.Parallel()
	s := Start(t, WithSandboxGitHub(time.Minute))
	s.GitHub.SetTokenLifetime(8 * time.Second)
	repo := s.GitHubRepo("acme/app")
	s.Model.On(testkit.PromptContains("hello"), testkit.Text("Hi."))
	v := s.NewSession(repo, "hello")
	s.turnEnds(v.ID, 1)
	old := s.forgeToken()
	var fresh string
	testenv.Eventually(t, 30*time.Second, "a refreshed token", func() bool {
		fresh = s.forgeToken()
		return fresh != old
	})
	// The Sandbox holds neither: the test hands both to the model's Bash.
	s.Model.On(testkit.PromptContains("show both tokens"), testkit.Bash("printf '%s\\n%s' "+fresh+" "+old))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("The tokens are "+fresh+" and "+old+"."))
	s.prompt(v.ID, "show both tokens")
	s.WaitEvent(v.ID, testenv.WaitMedium, "the answer", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && strings.HasPrefix(e.Text, "The tokens are")
	})
	stars := func(v string) string { return strings.Repeat("*", len(v)) }
	var result string
	for _, e := range s.Events(v.ID) {
		raw, _ := jsonOf(e)
		if strings.Contains(raw, old) || strings.Contains(raw, fresh) {
			t.Errorf("an Event shows a Sandbox token: %s", raw)
		}
		if e.Kind == protocol.EventToolResult {
			result = e.Text
		}
	}
	if result != stars(fresh)+"\n"+stars(old) {
		t.Errorf("tool output = %q, want both tokens masked", result)
	}
	screen := terminalBytes(t, s, v.ID, "The tokens are")
	if bytes.Contains(screen, []byte(old)) || bytes.Contains(screen, []byte(fresh)) {
		t.Error("a terminal frame holds a Sandbox token")
	}
	if !bytes.Contains(screen, []byte("The tokens are "+stars(fresh))) {
		t.Errorf("the terminal lacks the masked answer; it showed:\n%s", screen)
	}
}

// TestASessionWakesWithGitHubDownAndGetsItsTokenWhenItIsBack: with GitHub
// failing, a Session wakes and runs its Turn all the same, the failure is
// in its start log and the Runner's log once however often the Runner asks
// again, and the token arrives once GitHub answers.
func TestASessionWakesWithGitHubDownAndGetsItsTokenWhenItIsBack(t *testing.T) {
	t.Parallel()
	const retry = 250 * time.Millisecond // six asks in under 2 s
	s := Start(t, WithSandboxGitHub(retry))
	repo := s.GitHubRepo("acme/app")
	s.Model.On(testkit.PromptContains("hello"), testkit.Text("Hi."))
	v := s.NewSession(repo, "hello")
	s.turnEnds(v.ID, 1)
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/sleep", nil, nil); code != http.StatusNoContent {
		t.Fatalf("sleep: %d", code)
	}
	s.GitHub.SetDown(true)
	s.Model.On(testkit.PromptContains("again"), testkit.Text("Still here."))
	s.prompt(v.ID, "again")
	s.turnEnds(v.ID, 2)
	const failed = "have no GitHub token"
	asked := s.GitHub.Calls("any")
	testenv.Eventually(t, testenv.WaitMedium, "the Runner to ask again a few times", func() bool { return s.GitHub.Calls("any") >= asked+6 })
	minted := len(s.forgeTokens())
	count := func() (events int) {
		for _, e := range s.Events(v.ID) {
			if strings.Contains(e.Text, failed) {
				events++
			}
		}
		return events
	}
	if n, logged := count(), strings.Count(s.logText(), "no GitHub token for a Session's Sandbox"); n != 1 || logged != 1 {
		t.Errorf("the failure is in the start log %d times and the Runner's log %d, want once each", n, logged)
	}
	s.GitHub.SetDown(false)
	testenv.Eventually(t, testenv.WaitMedium, "the token once GitHub is back", func() bool { return len(s.forgeTokens()) > minted })
	if st := s.state(v.ID).State; st != api.Active {
		t.Errorf("the Session is %s, want awake", st)
	}
}

// TestAHubWithoutAGitHubAppSaysSoOnceNotAtEachSessionStart: with no GitHub
// App, the log says what the Hub lacks once, at its start, and two
// Sessions' starts add no warning of their own; each Session's start log
// still says its Sandbox has no GitHub token.
func TestAHubWithoutAGitHubAppSaysSoOnceNotAtEachSessionStart(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Model.On(testkit.PromptContains("hello"), testkit.Text("Hi."))
	for range 2 {
		v := s.NewSession(s.Repo(), "hello")
		s.turnEnds(v.ID, 1)
		noted := slices.ContainsFunc(s.Events(v.ID), func(e protocol.Event) bool { return strings.Contains(e.Text, "have no GitHub token") })
		if !noted {
			t.Errorf("session %s: its start log does not say its Sandbox has no GitHub token", v.ID)
		}
	}
	log := s.logText()
	if n := strings.Count(log, `level=WARN msg="this Hub has no GitHub App`); n != 1 {
		t.Errorf("the log says the Hub has no GitHub App %d times, want once", n)
	}
	if n := strings.Count(log, `level=WARN msg="no GitHub token for a Session's Sandbox`); n != 0 {
		t.Errorf("the log warns %d times that a Session's Sandbox has no GitHub token, want none", n)
	}
}

// TestTheSessionViewListsPushedBranchesAndPullRequests: the branch the
// Session pushed shows on its view with a link to GitHub; pull requests
// opened from it (with the Sandbox token, as gh would) show, live, once a
// later push in the transcript has the Hub ask GitHub again (about a
// branch it asked about less than HUB_PULLS_CHECK_GAP ago, once the gap
// is over), a title masked like any Session text, the open one with its
// checks and review (a failing check, an approval), on the view and the
// Sessions list's badge; kndl show's API lists the same.
func TestTheSessionViewListsPushedBranchesAndPullRequests(t *testing.T) {
	t.Parallel()
	s := Start(t, WithSandboxGitHub(time.Minute))
	id := s.gitSession()
	b := NewBrowser(t)
	s.SignInDev(b)
	own := ownBranch(id)
	b.Go(s.URL+"/sessions/"+id, `#branches li[data-branch="`+own+`"]`)
	if href := Eval[string](b, `document.querySelector('#branches li[data-branch="`+own+`"] a').href`); href != s.GitHub.URL+"/acme/app/tree/"+own {
		t.Errorf("the branch links to %q, want its page on GitHub", href)
	}

	// The second's title holds the relay's GitHub token, which the view
	// masks.
	tok := s.forgeToken()
	for i, title := range []string{"Add the thing", "Token " + tok} {
		if i > 0 {
			s.GitHub.MergePull("acme/app", i) // GitHub opens one at a time from a branch into another
		}
		body, _ := json.Marshal(map[string]string{"title": title, "head": own, "base": "main"})
		req, _ := http.NewRequest(http.MethodPost, s.GitHub.URL+"/repos/acme/app/pulls", bytes.NewReader(body))
		req.Header.Set("Authorization", "token "+tok)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("open a pull request with the relay's token: %v %v", resp, err)
		}
	}
	s.GitHub.AddCheckRun(t, "acme/app", 2, "lint", "completed", "success")
	s.GitHub.AddCheckRun(t, "acme/app", 2, "build", "completed", "failure")
	s.GitHub.AddReview(t, "acme/app", 2, "bob", "approved")
	s.Model.On(testkit.PromptContains("push another"), testkit.Bash("git -C /workspace push origin HEAD:refs/heads/kndl/${KNDL_SESSION_ID:0:8}/second"))
	s.prompt(id, "push another")
	b.Wait(testenv.WaitMedium, "the pull request and the second branch", `(() => {
		const pr = [...document.querySelectorAll('#branches li[data-branch="`+own+`"] a.pull')].find((a) => a.textContent === "#1 Add the thing");
		return pr && pr.href === `+"`"+s.GitHub.URL+"/acme/app/pull/1`"+` &&
			!!document.querySelector('#branches li[data-branch="kndl/`+id[:8]+`/second"]');
	})()`)
	b.Wait(testenv.WaitShort, "the open pull request's checks and review", `(() => {
		const pr = [...document.querySelectorAll('#branches li[data-branch="`+own+`"] a.pull')].find((a) => a.textContent.startsWith("#2 "));
		const note = pr && pr.nextElementSibling;
		return note && note.textContent === "open · checks failing · approved" && note.dataset.checks === "failing";
	})()`)
	var v api.SessionView
	s.Do(http.MethodGet, "/api/sessions/"+id, nil, &v)
	if len(v.Branches) != 2 || v.Branches[0].Name != own || len(v.Branches[0].Pulls) != 2 || v.Branches[1].Name != "kndl/"+id[:8]+"/second" {
		t.Fatalf("the API's branches: %+v, want %s with its two pull requests, then kndl/%s/second", v.Branches, own, id[:8])
	}
	if got := v.Branches[0].Pulls[0].Title; got != "Token "+strings.Repeat("*", len(tok)) {
		t.Errorf("a pull request's title with the relay's token in it shows %q, want it masked", got)
	}
	if p := v.Branches[0].Pulls[0]; p.Checks != "failing" || p.Review != "approved" {
		t.Errorf("the open pull request's checks %q and review %q, want failing, approved", p.Checks, p.Review)
	}
	// Nobody named the Session: it took its newest pull request's title,
	// masked.
	if v.Title != "Token "+strings.Repeat("*", len(tok)) {
		t.Errorf("the Session's title is %q, want its newest pull request's, masked", v.Title)
	}
	b.Wait(testenv.WaitShort, "the view's title, live", `document.getElementById("title").textContent === "Token `+strings.Repeat("*", len(tok))+`"`)
	if page := Eval[string](b, `document.getElementById("branches").textContent`); strings.Contains(page, tok) {
		t.Error("the Session view shows the relay's token in a pull request's title")
	}
	b.Screenshot("session-branches.png")

	// The Sessions list's badge says the same.
	b.Go(s.URL+"/", `#repos li[data-id="`+id+`"] a.pull`)
	if got := Eval[string](b, `document.querySelector('#repos li[data-id="`+id+`"] a.pull').textContent`); got != "#2 open · checks failing · approved" {
		t.Errorf("the list's badge reads %q, want #2 open · checks failing · approved", got)
	}
}

// TestARestartedRunnerAsksForTheSandboxTokenAgain: a Runner that restarts
// under a running Session holds no token, so it asks at once, and git in
// the Sandbox pushes through its relay with the new one, to a new branch
// and to the one it made before the restart.
func TestARestartedRunnerAsksForTheSandboxTokenAgain(t *testing.T) {
	t.Parallel()
	s := Start(t, WithSandboxGitHub(time.Minute))
	id := s.gitSession()
	before := s.forgeToken()
	s.RestartRunner()
	testenv.Eventually(t, testenv.WaitMedium, "a token from the restarted Runner", func() bool { return s.forgeToken() != before })
	if out, code := s.gitAsClaude(id, "commit", "--allow-empty", "-m", "after"); code != 0 {
		t.Fatalf("git commit: %s", out)
	}
	if out, code := s.gitAsClaude(id, "push", "origin", "HEAD:refs/heads/"+ownBranch(id)); code != 0 {
		t.Errorf("a push to the branch it made, after the Runner's restart, failed: %s", out)
	}
	if out, code := s.gitAsClaude(id, "push", "origin", "HEAD:refs/heads/kndl/"+id[:8]+"/after-restart"); code != 0 {
		t.Errorf("a push after the Runner's restart failed: %s", out)
	}
}

// TestTheMemorySearchReadsThePagesAProcessWrote: of this process's own
// anonymous memory, the canary's search reads the pages written to and
// none of those never touched; of a private mapping of a file, the pages
// written to and none of those that are still the file's, read or not.
func TestTheMemorySearchReadsThePagesAProcessWrote(t *testing.T) {
	t.Parallel()
	page := os.Getpagesize()
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pagemap.Close()
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	f, err := os.Create(filepath.Join(t.TempDir(), "mapped"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(64 * page)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fd   int
		flag int
	}{{"anonymous", -1, syscall.MAP_ANON}, {"a file's", int(f.Fd()), 0}} {
		b, err := syscall.Mmap(c.fd, 0, 64*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|c.flag)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Munmap(b)
		if c.fd >= 0 && b[20*page] != 0 { // read, not written: the file's page
			t.Fatal("a new file's page holds something")
		}
		copy(b[10*page:], "ghs_canary")
		b[11*page], b[40*page] = 1, 1
		lo := uint64(uintptr(unsafe.Pointer(&b[0])))
		var got [][2]int
		for _, r := range ownPages(pagemap, lo, lo+uint64(64*page)) {
			got = append(got, [2]int{int(r[0]-lo) / page, int(r[1]-lo) / page})
		}
		if want := [][2]int{{10, 12}, {40, 41}}; !slices.Equal(got, want) {
			t.Fatalf("of %s mapping, the pages read: %v, want %v (those written to)", c.name, got, want)
		}
		if !memHolds(mem, lo+uint64(10*page), lo+uint64(12*page), func(b []byte) bool { return bytes.Contains(b, []byte("ghs_canary")) }) {
			t.Fatalf("of %s mapping, the pages read do not hold what was written", c.name)
		}
	}
}
