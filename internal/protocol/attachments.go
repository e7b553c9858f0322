package protocol

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// TypeSessionAttachment is the Runner's request for one of a Session's
// Attachments (AttachmentRef); the Hub replies with AttachmentStream and
// sends the bytes over that stream.
const TypeSessionAttachment = "session.attachment"

// Attachment is a file the Creator attached to a prompt, as session.deliver
// names it: the Runner fetches it (session.attachment) and places it at
// AttachmentPath before it types the prompt.
type Attachment struct {
	ID string `json:"id"`
	// File is its name in the Sandbox: SafeFileName of the name it was
	// uploaded with. The Runner refuses any other.
	File string `json:"file"`
	Size int64  `json:"size"`
}

// AttachmentRef names one of a Session's Attachments.
type AttachmentRef struct {
	SessionID    string `json:"session_id"`
	AttachmentID string `json:"attachment_id"`
}

// AttachmentStream is the Hub's reply to session.attachment: the stream the
// Runner dials back (GET /runner/stream/{stream}) to read the Attachment's
// Size bytes, whose SHA-256 is SHA256 (hex).
type AttachmentStream struct {
	Stream string `json:"stream"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// attachmentDir is where a prompt's Attachments go in the Sandbox: in the
// Workspace, so a sleep, wake, archive and restore keep them and the
// Runner's purge deletes them with it, under a folder the Workspace's
// .git/info/exclude leaves out of git.
const attachmentDir = "/workspace/.kndl/attachments/"

// AttachmentsFolder is attachmentDir relative to the Workspace, as
// .git/info/exclude names it.
const AttachmentsFolder = ".kndl/attachments/"

// AttachmentPath is where the Runner places a prompt's Attachment in the
// Sandbox.
func AttachmentPath(promptID, file string) string {
	return attachmentDir + promptID + "/" + file
}

// AttachedLine is the line the Runner adds to a prompt for each of its
// Attachments. Claude Code reads a file @-mentioned in a prompt as it takes
// it, an image as an image block and text as the Read tool's result
// (measured on 2.1.328), so Claude has it without asking for it. The space
// after the path closes Claude Code's file completion: an @path at the very
// end keeps it open, and Enter then picks the completion instead of sending.
func AttachedLine(promptID, file string) string {
	return "Attached: @" + AttachmentPath(promptID, file) + " "
}

var attachedRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`Attached: @` + regexp.QuoteMeta(attachmentDir) + `([0-9a-f-]{36})/`)
})

// AttachedPrompt returns the id of the prompt whose Attachments a prompt's
// text names, as Claude Code wrote it in its transcript.
func AttachedPrompt(text string) (promptID string, ok bool) {
	m := attachedRE().FindStringSubmatch(text)
	if m == nil || !ValidSessionID(m[1]) {
		return "", false
	}
	return m[1], true
}

// maxFileName bounds a file name in the Sandbox, in bytes.
const maxFileName = 100

// SafeFileName makes the name a file was uploaded with safe as one file
// name in the Sandbox, and in an @-mention: its last path element, with
// letters, digits, '.', '-' and '_' kept and anything else (separators,
// controls, spaces, quotes) an '_', at most 100 bytes with its extension
// kept; never empty, "." or "..".
func SafeFileName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || (r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return r
		}
		return '_'
	}, name)
	if len(name) > maxFileName {
		ext := ""
		if i := strings.LastIndexByte(name, '.'); i > 0 && len(name)-i <= 20 {
			ext = name[i:]
		}
		stem := name[:maxFileName-len(ext)]
		for !utf8.ValidString(stem) {
			stem = stem[:len(stem)-1]
		}
		name = stem + ext
	}
	if strings.Trim(name, ".") == "" {
		return "file" + name
	}
	return name
}
