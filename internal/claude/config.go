package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"kndl.dev/kndl/internal/errdefs"
)

// Seed writes into configDir, a CLAUDE_CONFIG_DIR as the caller sees it,
// what makes Claude Code start straight to its prompt in workdir (the
// directory as Claude Code sees it, Workdir in a Sandbox), with no dialog
// waiting for a person: onboarding done, bypass-permissions mode accepted,
// workdir trusted and project-onboarded. It merges into the files Claude
// Code keeps there, keeping everything else (the conversation's state, the
// settings /model writes), and replaces each file atomically. Run it before
// each start: Claude Code rewrites these files as it runs.
//
// An existing file that is not a JSON object is an error and is left as
// it is.
func Seed(configDir, workdir string) error {
	if !filepath.IsAbs(workdir) {
		return fmt.Errorf("seed claude config: workdir %q is not absolute: %w", workdir, errdefs.ErrInvalid)
	}
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		return fmt.Errorf("seed claude config: %w", err)
	}
	state := filepath.Join(configDir, ".claude.json")
	settings := filepath.Join(configDir, "settings.json")
	// Read both before writing either, so a bad file changes nothing.
	st, err := readObject(state)
	if err != nil {
		return err
	}
	se, err := readObject(settings)
	if err != nil {
		return err
	}

	st["hasCompletedOnboarding"] = true
	// 2.1.328 migrates this key on its first start into settings.json's
	// skipDangerousModePermissionPrompt, and drops it: set both, so a later
	// start passes the dialog whichever it reads.
	st["bypassPermissionsModeAccepted"] = true
	se["skipDangerousModePermissionPrompt"] = true
	projects, err := object(st, "projects", state)
	if err != nil {
		return err
	}
	project, err := object(projects, workdir, state)
	if err != nil {
		return err
	}
	project["hasTrustDialogAccepted"] = true
	project["hasCompletedProjectOnboarding"] = true

	if err := writeObject(state, st); err != nil {
		return err
	}
	return writeObject(settings, se)
}

// readObject reads a JSON object file; a missing file is an empty object.
// Numbers are kept as written.
func readObject(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("seed claude config: %w", err)
	}
	obj := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("seed claude config: %s is not a JSON object (%v): %w", path, err, errdefs.ErrInvalid)
	}
	return obj, nil
}

// object returns parent[key], making it an empty object if absent.
func object(parent map[string]any, key, path string) (map[string]any, error) {
	v, ok := parent[key]
	if !ok || v == nil {
		m := map[string]any{}
		parent[key] = m
		return m, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("seed claude config: %s: %q is not an object: %w", path, key, errdefs.ErrInvalid)
	}
	return m, nil
}

func writeObject(path string, obj map[string]any) error {
	data, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return fmt.Errorf("seed claude config: %w", err)
	}
	tmp := path + ".kndl-tmp"
	if err := writeFileSync(tmp, append(data, '\n'), 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("seed claude config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("seed claude config: %w", err)
	}
	return nil
}
