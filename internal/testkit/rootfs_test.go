package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRootfsHasWhatSandboxesNeed(t *testing.T) {
	dir := Rootfs(t)
	for _, p := range []string{"usr/bin/bash", "usr/bin/tmux", "usr/bin/git", "bin/busybox", "etc/ssl/certs"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("test rootfs lacks %s: %v", p, err)
		}
	}
}
