package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"kndl.dev/kndl/internal/protocol"
)

// Claude Code takes each prompt once, whatever the Hub sends. The Hub
// sends a prompt again when the reply that said Claude Code took it was
// lost: with the connection, or with a Hub that stopped before it recorded
// it (a standby taking over, or the same Hub restarted, puts a prompt its
// store has on its way back at the head of the queue, and no Turn may be
// stored yet to say otherwise). The Runner keeps the ids of the prompts
// Claude Code took in the Session's directory, so a Runner restarted
// meanwhile knows them too, and answers one sent again as taken before
// without typing it. The list is the running Claude Code's: a start (a
// wake) begins it afresh, since a prompt the Hub puts back at a sleep is
// one the conversation the wake resumes never wrote down (the Hub's
// delivery machine, taken), to be typed again.

// takenFile is the file of a Session's directory that lists the ids of
// the last prompts Claude Code took, oldest first.
const takenFile = "taken-prompts.json"

// takenKeep is how many ids it keeps. The Hub sends a Session's prompts
// one at a time and puts one it lost the reply of back at the head of its
// queue, so what it sends again is the last one taken; a few more cost
// nothing.
const takenKeep = 16

// takenPrompts is a Session's list of the prompts Claude Code took. Its
// lock is held across a delivery, so a prompt sent again while it is
// typed is answered once the first delivery has said how it went.
type takenPrompts struct {
	mu     sync.Mutex
	loaded bool
	ids    []string
}

// deliverOnce is deliver for a prompt not taken before; one taken before
// is answered taken, Before, once the Hub has what the Runner told of the
// Session up to now (its Turn's Events), and typed no more.
func (s *session) deliverOnce(ctx context.Context, req protocol.SessionDeliver) (protocol.SessionDelivered, error) {
	defer s.firstOnce.Do(func() {
		if s.firstDelivered != nil {
			close(s.firstDelivered)
		}
	})
	t := &s.takenPrompts
	t.mu.Lock()
	defer t.mu.Unlock()
	path := filepath.Join(s.dir, takenFile)
	if !t.loaded {
		ids, err := readTaken(path)
		if err != nil {
			return protocol.SessionDelivered{}, err
		}
		t.ids, t.loaded = ids, true
	}
	if req.PromptID != "" && slices.Contains(t.ids, req.PromptID) {
		s.log.Info("a prompt Claude Code took is sent again; answered taken, not typed", "session", s.id, "prompt", req.PromptID)
		s.out.flushed(ctx, s.id, startFlushWait)
		return protocol.SessionDelivered{Taken: true, Before: true}, nil
	}
	out, err := s.deliver(ctx, req)
	if err != nil || !out.Taken || req.PromptID == "" {
		return out, err
	}
	t.ids = append(t.ids, req.PromptID)
	t.ids = t.ids[max(0, len(t.ids)-takenKeep):]
	raw, _ := json.Marshal(t.ids)
	if err := writeAtomic(path, raw); err != nil {
		// Taken all the same: only a reply lost now would type it twice.
		s.log.Warn("record a prompt taken", "session", s.id, "prompt", req.PromptID, "err", err)
	}
	return out, nil
}

// readTaken reads a Session's list of prompts taken; none is an empty
// list.
func readTaken(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var ids []string
	if err == nil {
		err = json.Unmarshal(raw, &ids)
	}
	if err != nil {
		return nil, fmt.Errorf("the Session's list of prompts taken (%s) is unreadable: %w; remove it to go on, at the risk of a prompt sent again being typed twice", path, err)
	}
	return ids, nil
}

// forgetTaken begins a Session's list of prompts taken afresh, for the
// Claude Code a start runs.
func forgetTaken(dir string) error {
	if err := os.Remove(filepath.Join(dir, takenFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("begin the Session's list of prompts taken afresh: %w", err)
	}
	return nil
}
