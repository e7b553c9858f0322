// Command printinfo prints buildinfo.Read as JSON, for the package's test
// of the -ldflags scripts/build-kndl sets.
package main

import (
	"encoding/json"
	"os"

	"kndl.dev/kndl/internal/buildinfo"
)

func main() {
	json.NewEncoder(os.Stdout).Encode(buildinfo.Read())
}
