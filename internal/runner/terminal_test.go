package runner

import (
	"strings"
	"testing"

	"kndl.dev/kndl/internal/protocol"
)

// drained is what the mirror would send: each frame as "snap", "size" or
// its data.
func drained(m *mirror) []string {
	var out []string
	for _, f := range coalesce(m.queue) {
		switch {
		case f.Snapshot:
			out = append(out, "snap")
		case f.Cols != 0:
			out = append(out, "size")
		default:
			out = append(out, string(f.Data))
		}
	}
	return out
}

func TestASnapshotLandsWhereItsPictureEnds(t *testing.T) {
	m := &mirror{on: true, gen: 1, wake: make(chan struct{}, 1)}
	m.output("%0", []byte("a"))  // 1
	m.output("%0", []byte("b"))  // 2
	m.output("%0", []byte("c"))  // 3: after the capture
	m.output("%0", []byte("de")) // 4
	m.place(protocol.TerminalFrame{Snapshot: true}, 2)
	got := strings.Join(drained(m), "|")
	// Tabs already drawn take ab and cde; a new tab takes the snapshot
	// (which holds ab) and then cde: nothing drawn twice, nothing missed.
	if want := "ab|snap|cde"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if m.queue[2].frame.Gen != 1 {
		t.Fatalf("the snapshot's gen is %d, want 1", m.queue[2].frame.Gen)
	}
}

func TestOutputOverTheLimitStartsANewGeneration(t *testing.T) {
	m := &mirror{on: true, gen: 1, wake: make(chan struct{}, 1)}
	m.output("%0", make([]byte, mirrorQueueMax))
	m.output("%0", []byte("x"))
	if m.gen != 2 || len(m.queue) != 0 {
		t.Fatalf("gen %d, %d queued: want gen 2 and the queue dropped", m.gen, len(m.queue))
	}
	m.output("%0", []byte("y"))
	if m.queue[0].frame.Gen != 2 {
		t.Fatalf("output after the drop is gen %d, want 2", m.queue[0].frame.Gen)
	}
	off := &mirror{}
	off.output("%0", []byte("z"))
	if off.outputs != 1 || len(off.queue) != 0 {
		t.Fatal("a mirror nobody opened queued output or lost count of it")
	}
}

func TestDrawSnapshot(t *testing.T) {
	info := []string{"80 3 4 1 1 1 1 0 0 0 0 1"}
	f, err := drawSnapshot(info, []string{"\x1b[1mtop\x1b[0m", "middle", "bottom", "extra"})
	if err != nil {
		t.Fatal(err)
	}
	want := "\x1b[?1049h\x1b[?2004h\x1b[?1h\x1b[?1006h\x1b[H\x1b[2J\x1b[1mtop\x1b[0m\x1b[0m\r\nmiddle\x1b[0m\r\nbottom\x1b[0m\x1b[2;5H\x1b[?25h"
	if string(f.Data) != want || !f.Snapshot || f.Cols != 80 || f.Rows != 3 {
		t.Fatalf("got %q %+v,\nwant %q", f.Data, f, want)
	}
	if _, err := drawSnapshot([]string{"80 x"}, nil); err == nil {
		t.Fatal("a malformed pane state was taken")
	}
}
