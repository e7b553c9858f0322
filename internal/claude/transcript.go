package claude

import (
	"path/filepath"
	"strconv"
	"unicode/utf16"
)

// TranscriptPath is where Claude Code keeps the transcript of conversation
// (its session UUID) run in cwd: configDir/projects/<cwd as a
// name>/<conversation>.jsonl. In a Sandbox, cwd is Workdir, named
// "-workspace".
func TranscriptPath(configDir, cwd, conversation string) string {
	return filepath.Join(configDir, "projects", projectName(cwd), conversation+".jsonl")
}

// projectName is Claude Code's name for a working directory, as measured on
// 2.1.328: every UTF-16 code unit that is not an ASCII letter or digit
// becomes "-", so "/" does and an emoji becomes "--"; a name longer than
// 200 is cut there and gets "-" and a hash of the path (Java's String
// hashCode, absolute, in base 36).
func projectName(cwd string) string {
	units := utf16.Encode([]rune(cwd))
	name := make([]byte, len(units))
	var hash int32
	for i, u := range units {
		hash = hash*31 + int32(u)
		switch {
		case 'a' <= u && u <= 'z', 'A' <= u && u <= 'Z', '0' <= u && u <= '9':
			name[i] = byte(u)
		default:
			name[i] = '-'
		}
	}
	const max = 200
	if len(name) <= max {
		return string(name)
	}
	h := int64(hash)
	if h < 0 {
		h = -h
	}
	return string(name[:max]) + "-" + strconv.FormatInt(h, 36)
}
