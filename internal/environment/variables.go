package environment

import (
	"regexp"
	"sync"
)

// A Variable's limits, whoever sets it: a person, or applying a draft
// made from the Repo's devcontainer.json.
const (
	// MaxVariableBytes bounds one Variable's value.
	MaxVariableBytes = 64 << 10
	// MaxVariableName bounds its name.
	MaxVariableName = 128
)

// VariableName is what a Variable's name may be: letters, digits and _,
// not starting with a digit, at most MaxVariableName bytes.
var VariableName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`) })
