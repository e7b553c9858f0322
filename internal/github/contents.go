package github

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"kndl.dev/kndl/internal/errdefs"
)

// FileAt reads path on owner/repo's default branch with the App's
// contents-read token, pinned to the branch's commit so the bytes and the
// commit named go together (forge.Files).
func (c *Client) FileAt(ctx context.Context, owner, repo, path string, max int64) ([]byte, string, error) {
	var info struct {
		DefaultBranch string `json:"default_branch"`
	}
	status, err := c.asInstallationWith(ctx, ClonePermissions, owner, repo, "", &info)
	if err := notFound(status, err, "the GitHub App cannot read "+owner+"/"+repo+" (is it installed there?)"); err != nil {
		return nil, "", err
	}
	var branch struct {
		Commit struct {
			SHA string `json:"sha"`
		} `json:"commit"`
	}
	status, err = c.asInstallationWith(ctx, ClonePermissions, owner, repo, "/branches/"+url.PathEscape(info.DefaultBranch), &branch)
	if err := notFound(status, err, "no default branch "+info.DefaultBranch); err != nil {
		return nil, "", err
	}
	inst, err := c.installation(ctx, owner, repo)
	if err != nil {
		return nil, "", err
	}
	tok, err := c.installationToken(ctx, inst, ClonePermissions)
	if err != nil {
		return nil, "", err
	}
	var p []string
	for _, elem := range strings.Split(path, "/") {
		p = append(p, url.PathEscape(elem))
	}
	req, err := c.apiRequest(ctx, http.MethodGet, "/repos/"+owner+"/"+repo+"/contents/"+strings.Join(p, "/")+"?ref="+branch.Commit.SHA, "token "+tok, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", "application/vnd.github.raw")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("reach GitHub: %v: %w", err, errdefs.ErrUnavailable)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, "", fmt.Errorf("%s has no %s at %s (%.12s): %w", owner+"/"+repo, path, info.DefaultBranch, branch.Commit.SHA, errdefs.ErrNotFound)
	case resp.StatusCode/100 != 2:
		return nil, "", fmt.Errorf("GitHub answered %s reading %s: %w", resp.Status, path, errdefs.ErrUnavailable)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("read %s from GitHub: %v: %w", path, err, errdefs.ErrUnavailable)
	case int64(len(b)) > max:
		return nil, "", fmt.Errorf("%s is over %d bytes: %w", path, max, errdefs.ErrTooLarge)
	}
	return b, branch.Commit.SHA, nil
}

// notFound reads an answer of asInstallation: none (status 0) or a 404
// is ErrNotFound saying why.
func notFound(status int, err error, why string) error {
	if status == http.StatusNotFound || status == 0 && err == nil {
		return fmt.Errorf("%s: %w", why, errdefs.ErrNotFound)
	}
	return err
}
