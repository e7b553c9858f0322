package cli

import (
	"context"
	"flag"
	"fmt"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
)

// sessionFork forks a Session: kndl fork ID [--at TURN] [PROMPT | -].
// Without a prompt the fork waits asleep for one.
func sessionFork(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "fork")
	at := fs.Int("at", 0, "the Turn whose end the fork starts from (default: the last; only the last for now)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return ErrUsage
	}
	req := api.NewFork{}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "at" {
			req.At = at // the Hub says which Turns there are
		}
	})
	if len(pos) == 2 {
		if req.Prompt, err = promptArg(io, pos[1:]); err != nil {
			return err
		}
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	f, err := c.Fork(ctx, pos[0], req)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, f)
	}
	fmt.Fprintf(io.Stdout, "Session %s is a fork of %s at the end of Turn %d.\n%s\n", f.SessionID, f.ParentID, f.Turn, f.How)
	if req.Prompt != "" {
		fmt.Fprintf(io.Stdout, "Its first prompt wakes it. Watch it with: kndl watch %s\n", f.SessionID)
	} else {
		fmt.Fprintf(io.Stdout, "It is asleep until a prompt: kndl prompt %s TEXT\n", f.SessionID)
	}
	return nil
}
