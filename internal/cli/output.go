package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
)

func printJSON(io IO, v any) error {
	enc := json.NewEncoder(io.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
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
