package claude

import (
	"strings"
	"testing"
)

func TestTranscriptPath(t *testing.T) {
	long := "/tmp/TestExplore2750259254/001/" + strings.Repeat("a", 120) + "/" + strings.Repeat("b", 120)
	// Each want was read off the directory 2.1.328 made for that cwd.
	tests := []struct{ cwd, want string }{
		{"/workspace", "/cfg/projects/-workspace/" + conv + ".jsonl"},
		{"/tmp/x/my.proj_x Y", "/cfg/projects/-tmp-x-my-proj-x-Y/" + conv + ".jsonl"},
		{"/tmp/TestExplore3335855617/001/é😀ü", "/cfg/projects/-tmp-TestExplore3335855617-001-----/" + conv + ".jsonl"},
		{long, "/cfg/projects/" + "-tmp-TestExplore2750259254-001-" + strings.Repeat("a", 120) + "-" + strings.Repeat("b", 48) + "-wl2xlj/" + conv + ".jsonl"},
	}
	for _, tt := range tests {
		if got := TranscriptPath("/cfg", tt.cwd, conv); got != tt.want {
			t.Errorf("TranscriptPath(%q): got %s, want %s", tt.cwd, got, tt.want)
		}
	}
}
