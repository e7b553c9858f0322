package runner

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"kndl.dev/kndl/internal/protocol"
)

// TestASessionThatTookAPoolSandboxIsFoundThroughItsLink: its Sandbox and
// conversation are the pool's, and a purge removes the pool directory
// with the link; a Session of its own keeps its own.
func TestASessionThatTookAPoolSandboxIsFoundThroughItsLink(t *testing.T) {
	home := t.TempDir()
	const sid, pid = "0b7e2a4c-1111-4222-8333-944455556666", "7c9d0e1f-2222-4333-8444-a55566667777"
	for _, d := range []string{filepath.Join(home, "pool", pid, "workspace"), filepath.Join(home, "sessions", "own")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	linked := filepath.Join(home, "sessions", sid)
	if err := os.Symlink(filepath.Join("..", "pool", pid), linked); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir, id, sandbox, conversation string
	}{
		{linked, sid, "w-" + pid, pid},
		{filepath.Join(home, "sessions", "own"), sid, "s-" + sid, sid},
	}
	for _, tt := range tests {
		if got := sandboxOf(tt.dir, tt.id); got != tt.sandbox {
			t.Errorf("sandboxOf(%s): got %s, want %s", tt.dir, got, tt.sandbox)
		}
		if got := conversationOf(tt.dir, tt.id); got != tt.conversation {
			t.Errorf("conversationOf(%s): got %s, want %s", tt.dir, got, tt.conversation)
		}
	}
	if err := removeSessionDir(linked); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{linked, filepath.Join(home, "pool", pid)} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the purge: got %v, want it gone", p, err)
		}
	}
}

// TestAPoolSandboxFitsOnlyTheVariablesAndInstallationsItStartedWith:
// the digest changes with any Variable's name, value or build flag and
// with the Installations, whatever their order.
func TestAPoolSandboxFitsOnlyTheVariablesAndInstallationsItStartedWith(t *testing.T) {
	vars := []protocol.Variable{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
	base := fitOf(vars, nil)
	tests := []struct {
		name string
		vars []protocol.Variable
		mcp  []protocol.MCPServer
		same bool
	}{
		{"the same, in another order", []protocol.Variable{vars[1], vars[0]}, nil, true},
		{"a value changed", []protocol.Variable{{Name: "A", Value: "1"}, {Name: "B", Value: "3"}}, nil, false},
		{"one added", append(append([]protocol.Variable(nil), vars...), protocol.Variable{Name: "C"}), nil, false},
		{"one now at build", []protocol.Variable{{Name: "A", Value: "1", AtBuild: true}, vars[1]}, nil, false},
		{"an Installation", vars, []protocol.MCPServer{{Installation: "docs"}}, false},
	}
	for _, tt := range tests {
		if got := fitOf(tt.vars, tt.mcp) == base; got != tt.same {
			t.Errorf("%s: got same %v, want %v", tt.name, got, tt.same)
		}
	}
}

// TestAPoolPanesOutputGoesToTheSessionThatTakesItCountedOn: the output of a
// pool Sandbox's pane, whose control client the fill kept, is counted and
// dropped until a Session takes it, then reaches the Session's terminal
// mirror, whose count goes on from the control client's (its snapshots are
// placed by that count).
func TestAPoolPanesOutputGoesToTheSessionThatTakesItCountedOn(t *testing.T) {
	var sink paneSink
	sink.output("claude", []byte("drawn in the pool"))
	sink.output("claude", []byte("more"))
	m := &mirror{on: true, wake: make(chan struct{}, 1)}
	sink.handTo(m)
	sink.output("claude", []byte("the Session's"))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.outputs != 3 || len(m.queue) != 1 || string(m.queue[0].frame.Data) != "the Session's" || m.queue[0].n != 3 {
		t.Fatalf("the mirror counts %d outputs and queues %+v; want 3, and the Session's output alone as the 3rd", m.outputs, m.queue)
	}
}
