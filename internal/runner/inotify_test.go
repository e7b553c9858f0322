package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheInotifyLimitIsRaisedToFitTheSessionsAndNeverLowered(t *testing.T) {
	file := filepath.Join(t.TempDir(), "max_user_instances")
	os.WriteFile(file, []byte("128\n"), 0o644)
	note, err := roomForInotify(file, 50)
	if err != nil || !strings.Contains(note, "from 128 to 278") {
		t.Fatalf("got %q, %v; want it raised from 128 to 278", note, err)
	}
	if b, _ := os.ReadFile(file); string(b) != "278" {
		t.Fatalf("the limit is %q, want 278", b)
	}
	os.WriteFile(file, []byte("8192\n"), 0o644)
	if note, err := roomForInotify(file, 50); err != nil || note != "" {
		t.Fatalf("a higher limit: got %q, %v; want it left alone", note, err)
	}
	if b, _ := os.ReadFile(file); string(b) != "8192\n" {
		t.Fatalf("the limit is %q, want it left at 8192", b)
	}
	os.WriteFile(file, []byte("many"), 0o644)
	if _, err := roomForInotify(file, 50); err == nil || !strings.Contains(err.Error(), "not a count") {
		t.Fatalf("got %v, want an error naming what it read", err)
	}
}
