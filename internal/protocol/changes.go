package protocol

import "time"

// TypeSessionDiff asks the Runner for a Session's changes (SessionDiff),
// which it computes with git on its own host in the Workspace, running
// nothing in the Sandbox. It replies SessionDiffInfo once the stream it
// dialled back is up, then writes the Changes as JSON on the stream: a
// diff is allowed more than a frame holds. Since version 6.
const TypeSessionDiff = "session.diff"

// DiffVersion is the first version whose Runner answers session.diff.
const DiffVersion = 6

// SessionDiff names the Session and the stream to send its Changes over.
type SessionDiff struct {
	SessionID string `json:"session_id"`
	Stream    string `json:"stream"`
}

// SessionDiffInfo is the Runner's reply to session.diff: how many bytes of
// JSON the stream carries.
type SessionDiffInfo struct {
	Size int64 `json:"size"`
}

// DiffMax bounds the diff text of a Session's Changes: past it the rest of
// the files are listed without their diff, and Cut says so.
const DiffMax = 2 << 20

// ChangesMax bounds the JSON of a Session's Changes, which the Runner
// reads from its confined git and the Hub from the Runner: the diff text
// is at most DiffMax, and JSON escapes it at most sixfold (\u00XX), with
// room for names and commits.
const ChangesMax = 8 * DiffMax

// Changes is a Workspace's work against the branch it started from: each
// file that differs (committed or not, untracked files too) and the
// commits made since, with which of them are pushed.
type Changes struct {
	// Base is the branch the Workspace started from, and BaseCommit the
	// commit it was at then.
	Base       string `json:"base"`
	BaseCommit string `json:"base_commit"`
	// Branch is the branch checked out now, empty when detached.
	Branch  string        `json:"branch,omitempty"`
	Files   []ChangedFile `json:"files"`
	Commits []Commit      `json:"commits"`
	// Cut is set when the diff went past DiffMax: what was left out and
	// how to see it.
	Cut string `json:"cut,omitempty"`
}

// ChangedFile is one file of Changes. Status is added, modified, deleted,
// renamed, copied or changed (its type or mode); OldPath is set for
// renamed and copied. Diff is git's unified diff of the file, empty for a
// file past the cut (Omitted) or one whose change is its mode alone.
type ChangedFile struct {
	Path      string `json:"path"`
	OldPath   string `json:"old_path,omitempty"`
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary,omitempty"`
	Omitted   bool   `json:"omitted,omitempty"`
	Diff      string `json:"diff"`
}

// Commit is a commit made in the Session, newest first. Pushed says a
// remote-tracking branch of the Workspace holds it.
type Commit struct {
	Hash    string    `json:"hash"`
	Subject string    `json:"subject"`
	Author  string    `json:"author"`
	At      time.Time `json:"at"`
	Pushed  bool      `json:"pushed"`
}
