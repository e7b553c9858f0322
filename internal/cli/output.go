package cli

import "encoding/json"

func printJSON(io IO, v any) error {
	enc := json.NewEncoder(io.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
