package triggers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// pushPayload is what a trigger reads of a push delivery.
type pushPayload struct {
	Ref        string `json:"ref"`
	After      string `json:"after"`
	Repository struct {
		ghRepo
		DefaultBranch string `json:"default_branch"`
	} `json:"repository"`
	Commits []struct {
		Added    []string `json:"added"`
		Removed  []string `json:"removed"`
		Modified []string `json:"modified"`
	} `json:"commits"`
}

// maxPushCommits is the most commits GitHub lists in a push's payload; a
// push of more may have changed any file.
const maxPushCommits = 2048

// push: a push to the default branch of one of the Hub's Repos tells
// Pushed which files it changed.
func (r *Receiver) push(ctx context.Context, body []byte) error {
	var p pushPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Errorf("read the push payload: %w", err)
	}
	if r.opts.Pushed == nil || p.Repository.DefaultBranch == "" || p.Ref != "refs/heads/"+p.Repository.DefaultBranch {
		return nil
	}
	th, err := r.repoOf(ctx, p.Repository.ghRepo)
	if err != nil || th.hub.ID == "" {
		return err
	}
	var changed []string
	for _, c := range p.Commits {
		changed = append(changed, c.Added...)
		changed = append(changed, c.Removed...)
		changed = append(changed, c.Modified...)
	}
	if len(p.Commits) >= maxPushCommits {
		changed = nil // any file
	}
	slices.Sort(changed)
	return r.opts.Pushed(ctx, th.hub, p.After, slices.Compact(changed))
}
