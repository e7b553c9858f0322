package cli

import (
	"context"
	"errors"
)

func transcriptFollow(ctx context.Context, io IO, args []string) error {
	return errors.New("this build cannot follow transcripts yet")
}
