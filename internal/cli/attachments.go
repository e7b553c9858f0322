package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/protocol"
)

// stringList is a flag given once per value (a file, a Repo).
type stringList []string

func (f *stringList) String() string     { return strings.Join(*f, ",") }
func (f *stringList) Set(v string) error { *f = append(*f, v); return nil }

// attachFiles uploads each file to the Session, under its base name, and
// returns their attachment ids, for the prompt that carries them. The Hub
// refuses a file past its limits before any of it is kept.
func attachFiles(ctx context.Context, session string, files []string) ([]string, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if len(files) > api.MaxPromptAttachments {
		return nil, fmt.Errorf("%d files: a prompt carries at most %d", len(files), api.MaxPromptAttachments)
	}
	c, err := apiclient.New()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, name := range files {
		a, err := attachFile(ctx, c, session, name)
		if err != nil {
			return nil, fmt.Errorf("attach %s: %w", name, err)
		}
		ids = append(ids, a.ID)
	}
	return ids, nil
}

func attachFile(ctx context.Context, c *apiclient.Client, session, name string) (api.Attachment, error) {
	var a api.Attachment
	f, err := os.Open(name)
	if err != nil {
		return a, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return a, err
	}
	if !fi.Mode().IsRegular() {
		return a, fmt.Errorf("not a regular file")
	}
	return c.Attach(ctx, session, filepath.Base(name), f, fi.Size())
}

// attachedNote says what files a prompt carries, after its id.
func attachedNote(as []api.Attachment) string {
	if len(as) == 0 {
		return ""
	}
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Name
	}
	return " with " + strings.Join(names, ", ")
}

// sessionAttachments lists a Session's attachments, or with get downloads
// one: into -o FILE, to stdout with -o -, or else into a new file in this
// directory named after it, never over one that is there.
func sessionAttachments(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "attachments")
	asJSON := fs.Bool("json", false, "print the list as JSON")
	out := fs.String("o", "", "with get: the file to write, or - for stdout")
	pos, err := Parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 1:
	case len(pos) == 3 && pos[1] == "get":
		return attachmentGet(ctx, io, pos[0], pos[2], *out)
	default:
		return ErrUsage
	}
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	as, err := c.Attachments(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, as)
	}
	if len(as) == 0 {
		fmt.Fprintln(io.Stdout, "No files are attached to the Session's prompts.")
		return nil
	}
	rows := make([][]string, len(as))
	for i, a := range as {
		rows[i] = []string{a.ID, a.Name, sizeText(a.Size), a.Type, or(a.PromptID, "-")}
	}
	return table(io, "ID\tNAME\tSIZE\tTYPE\tPROMPT", rows)
}

func attachmentGet(ctx context.Context, io IO, session, id, out string) error {
	c, err := apiclient.New()
	if err != nil {
		return err
	}
	if out == "-" {
		return c.DownloadAttachment(ctx, session, id, io.Stdout)
	}
	if out == "" {
		as, err := c.Attachments(ctx, session)
		if err != nil {
			return err
		}
		var a api.Attachment
		for _, x := range as {
			if x.ID == id {
				a = x
			}
		}
		if a.ID == "" {
			return fmt.Errorf("the Session has no attachment %s (kndl attachments %s lists them)", id, session)
		}
		out = protocol.SafeFileName(a.Name)
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s is there already: name another file with -o", out)
	}
	if err != nil {
		return err
	}
	err = c.DownloadAttachment(ctx, session, id, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return err
	}
	fmt.Fprintf(io.Stdout, "Saved %s.\n", out)
	return nil
}

// sizeText is a size in bytes as people read it.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
