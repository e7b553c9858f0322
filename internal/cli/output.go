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

// call makes one call to the Hub's API with this machine's CLI config.
func call(ctx context.Context, method, path string, in, out any) error {
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	return c.Do(ctx, method, path, in, out)
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
