package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"kndl.dev/kndl/internal/apiclient"
)

func printJSON(io IO, v any) error {
	enc := json.NewEncoder(io.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// listing runs a list command: its one flag, --json, then get, printing
// what get returns as JSON with --json. It returns the list and whether it
// is still to be printed as a table.
func listing[T any](ctx context.Context, io IO, name string, args []string, get func(*apiclient.Client, context.Context) (T, error)) (v T, asTable bool, err error) {
	fs := Flags(io, name)
	asJSON := fs.Bool("json", false, "print JSON")
	if err = fs.Parse(args); err != nil {
		return v, false, err
	}
	c, err := apiclient.New()
	if err == nil {
		v, err = get(c, ctx)
	}
	if err != nil {
		return v, false, err
	}
	if *asJSON {
		return v, false, printJSON(io, v)
	}
	return v, true, nil
}

// table prints a header and rows of tab-separated cells, aligned.
func table(io IO, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
