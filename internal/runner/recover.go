package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/dockerd"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/tmux"
)

// stopSession stops a Session's Claude Code (a hangup, as closing its
// terminal would) and then its Sandbox, keeping every disk and the
// Workspace: the Session sleeps.
func (r *Runner) stopSession(ctx context.Context, id string) error {
	r.mu.Lock()
	s := r.sessions[id]
	delete(r.sessions, id)
	r.mu.Unlock()
	r.relay.Revoke(id)
	r.git.Close(id)
	r.egress.forget(id)
	if s != nil {
		s.stopping.Store(true)
		if s.ctl != nil {
			s.ctl.Run(ctx, tmux.Command("kill-session", "-t", paneTarget))
			// Claude Code writes to its config dir for about a second after
			// the hangup (measured): let it finish before the stop.
			select {
			case <-s.ctl.Done():
			case <-time.After(10 * time.Second):
			}
		}
		if s.cancel != nil {
			s.cancel()
		}
	}
	if err := r.stopSandbox(ctx, sandboxOf(r.sessionDir(id), id)); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return fmt.Errorf("stop the Sandbox: %w", err)
	}
	return nil
}

// stopSandbox stops a Session's Sandbox, its Docker containers first (if
// it runs dockerd), so databases in them shut down cleanly; one that won't
// is killed with the Sandbox all the same.
func (r *Runner) stopSandbox(ctx context.Context, id string) error {
	if err := dockerd.StopContainers(ctx, r.backend, id); err != nil && !errors.Is(err, sandbox.ErrNotFound) && !errors.Is(err, sandbox.ErrNotRunning) {
		r.log.Warn("stop the Sandbox's containers", "sandbox", id, "err", err)
	}
	return r.backend.Stop(ctx, id)
}

// adopt finds the Sessions whose Claude Code still runs in their Sandboxes
// after this Runner restarted, and attaches to each again: a control client
// on its tmux, and its Session token read back from Claude Code's
// environment, held by the relay until the Hub gives a new mod token. One
// started without kndl's editor (deliver.go) is not attached. A
// Sandbox whose Claude Code has exited is stopped: the Session sleeps.
func (r *Runner) adopt(ctx context.Context) {
	all, err := r.backend.List(ctx)
	if err != nil {
		r.log.Warn("list sandboxes", "err", err)
		return
	}
	for _, st := range all {
		id, ok := strings.CutPrefix(st.ID, "s-")
		if strings.HasPrefix(st.ID, "w-") {
			id, ok = r.warm.adoptPool(ctx, st)
		}
		if !ok || !protocol.ValidSessionID(id) || st.State != sandbox.StateRunning {
			continue
		}
		r.mu.Lock()
		known := r.sessions[id] != nil
		r.mu.Unlock()
		if known {
			continue
		}
		if err := r.attach(ctx, id, st.Addr); err != nil {
			r.log.Info("a Session's Claude Code is not running; stopping its Sandbox", "session", id, "why", err)
			r.stopSandbox(ctx, st.ID)
			continue
		}
		r.log.Info("took a running Session back", "session", id)
	}
}

// attach connects a new control client to a running Session's tmux and
// adopts its Session token, taken only from its Sandbox's address from.
func (r *Runner) attach(ctx context.Context, id string, from netip.Addr) error {
	s := r.newSession(id)
	s.user = keptUser(s.dir)
	sctx, cancel := context.WithCancel(r.life)
	s.ctx, s.cancel = sctx, cancel
	pid, err := s.attachPane(ctx)
	if err != nil {
		cancel()
		return err
	}
	var env bytes.Buffer
	p, err := r.backend.Exec(ctx, s.sandbox, sandbox.Cmd{Args: []string{"cat", "/proc/" + pid + "/environ"}, Stdout: &env,
		Env: []string{"PATH=/usr/bin:/bin"}})
	if err == nil {
		_, err = p.Wait()
	}
	var token, oauth, base string
	editor := false
	for _, kv := range strings.Split(env.String(), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "KNDL_MOD_TOKEN":
			token = v
		case "CLAUDE_CODE_OAUTH_TOKEN":
			oauth = v
		case "ANTHROPIC_BASE_URL":
			base = v
		}
		editor = editor || kv == editorEnv || kv == editorEnvBefore
	}
	if err != nil || token == "" {
		cancel()
		return fmt.Errorf("Claude Code's Session token is not readable: %v", err)
	}
	if !editor {
		// Started by a Runner that typed prompts: no prompt could reach it.
		// It sleeps, and wakes with the editor.
		cancel()
		return fmt.Errorf("Claude Code runs without kndl's editor, which prompts come through")
	}
	if err := r.egress.adopt(r.sessionDir(id), id, from); err != nil {
		cancel()
		return err
	}
	r.relay.Adopt(id, token, from)
	r.reopenGit(id)
	if oauth != "" && strings.HasSuffix(base, "/model/"+token) {
		// Its model requests come through the relay with what it holds in
		// place of the Creator's token (the token itself with
		// HUB_CLAUDE_TOKEN=sandbox), which went with the old process: they
		// wait for the Hub's (resume).
		r.relay.Hold(id, "", oauth)
	}
	r.mu.Lock()
	r.sessions[id] = s
	r.mu.Unlock()
	return nil
}

// attachPane connects a control client to the Session's running tmux, for
// as long as s.ctx lives, and returns its Claude Code's pid.
func (s *session) attachPane(ctx context.Context) (pid string, err error) {
	ctl, err := controlClient(s.ctx, s.backend, s.sandbox, sandbox.Cmd{
		Args: []string{"tmux", "-S", tmuxSocket, "-C", "attach", "-t", paneTarget},
		Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TERM=xterm-256color"},
	}, s.mirror.output)
	if err != nil {
		return "", fmt.Errorf("tmux: %w", err)
	}
	s.ctl = ctl
	lines, err := ctl.Run(ctx, tmux.Command("display", "-p", "-t", paneTarget, "#{pane_pid} #{pane_dead} #{pane_width} #{pane_height}"))
	var f []string
	if err == nil && len(lines) == 1 {
		f = strings.Fields(lines[0])
	}
	if len(f) != 4 || f[1] == "1" {
		return "", fmt.Errorf("no live Claude Code in the pane")
	}
	s.mirror.cols, _ = strconv.Atoi(f[2])
	s.mirror.rows, _ = strconv.Atoi(f[3])
	return f[0], nil
}

// holdAgain gives the relay a taken-back Session's Creator's token again,
// from the Hub, for the placeholder its Claude Code holds.
func (r *Runner) holdAgain(ctx context.Context, id, placeholder string) {
	var creds protocol.SessionCredentials
	if err := r.link.request(ctx, protocol.TypeSessionCredentials, protocol.SessionRef{SessionID: id}, &creds); err != nil {
		r.log.Warn("the Hub gave no Creator's token for a Session taken back; its model requests wait", "session", id, "err", err)
		return
	}
	if err := r.relay.Hold(id, creds.ClaudeToken, placeholder); err != nil {
		r.log.Warn("resume session", "session", id, "err", err)
	}
}

// running lists the Sessions whose Claude Code runs here, for the hello.
func (r *Runner) running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.sessions))
	for id, s := range r.sessions {
		if s.ctl != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// resume takes the Hub's welcome: each Session it takes back gets its new
// mod token, and its transcript followed again from where the Hub has it;
// those it does not take back are stopped, each before a start of it goes
// on (settle.go).
func (r *Runner) resume(ctx context.Context, reported []string, w protocol.Welcome) {
	taken := map[string]bool{}
	for _, rs := range w.Sessions {
		taken[rs.SessionID] = true
		r.mu.Lock()
		s := r.sessions[rs.SessionID]
		r.mu.Unlock()
		if s == nil {
			continue
		}
		if err := r.relay.SetModToken(rs.SessionID, rs.ModToken); err != nil {
			r.log.Warn("resume session", "session", rs.SessionID, "err", err)
			continue
		}
		if placeholder, ok := r.relay.Awaits(rs.SessionID); ok {
			r.holdAgain(ctx, rs.SessionID, placeholder)
		}
		if !s.following.Swap(true) {
			s.watch(rs.Offsets)
		}
	}
	for _, id := range reported {
		if !taken[id] {
			r.log.Info("the Hub did not take a running Session back; stopping it", "session", id)
			if err := r.stopSession(ctx, id); err != nil {
				r.log.Warn("stop session", "session", id, "err", err)
			}
			r.settle.settled(id)
		}
	}
}
