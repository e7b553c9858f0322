package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"kndl.dev/kndl/internal/idleheap"
	"kndl.dev/kndl/internal/transcript"
)

// transcriptFollow streams a Session's transcript as Events; the Runner runs
// it inside the Sandbox and reads its stdout.
func transcriptFollow(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "transcript follow")
	var o transcript.Options
	fs.StringVar(&o.ConfigDir, "config-dir", "", "Claude Code's CLAUDE_CONFIG_DIR")
	fs.StringVar(&o.Cwd, "cwd", "", "Claude Code's working directory")
	fs.StringVar(&o.Conversation, "conversation", "", "the conversation's UUID")
	offsets := fs.String("offsets", "", "where to resume, as JSON from the last batch")
	if _, err := Parse(fs, args); err != nil {
		return err
	}
	if *offsets != "" {
		if err := json.Unmarshal([]byte(*offsets), &o.Offsets); err != nil {
			return fmt.Errorf("--offsets: %w", err)
		}
	}
	o.Stdin = io.Stdin
	idleheap.Trim()
	return transcript.Follow(ctx, o, io.Stdout)
}
