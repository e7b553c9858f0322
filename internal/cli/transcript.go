package cli

import (
	"context"
	"encoding/json"
	"fmt"
	goio "io"

	"kndl.dev/kndl/internal/transcript"
)

// transcriptFollowArgs is `kndl transcript follow`, hosted: it streams a
// Session's transcript as Events to the Runner, which runs it inside the
// Sandbox and reads its stdout.
func transcriptFollowArgs(io IO, args []string) (hostedRun, error) {
	fs := Flags(io, "transcript follow")
	var o transcript.Options
	fs.StringVar(&o.ConfigDir, "config-dir", "", "Claude Code's CLAUDE_CONFIG_DIR")
	fs.StringVar(&o.Cwd, "cwd", "", "Claude Code's working directory")
	fs.StringVar(&o.Conversation, "conversation", "", "the conversation's UUID")
	offsets := fs.String("offsets", "", "where to resume, as JSON from the last batch")
	if _, err := Parse(fs, args); err != nil {
		return nil, err
	}
	if *offsets != "" {
		if err := json.Unmarshal([]byte(*offsets), &o.Offsets); err != nil {
			return nil, fmt.Errorf("--offsets: %w", err)
		}
	}
	return func(ctx context.Context, in goio.Reader, out goio.Writer) error {
		o.Stdin = in
		return transcript.Follow(ctx, o, out)
	}, nil
}
