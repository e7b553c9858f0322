package session

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/protocol"
)

// TestAWatcherSeesEveryEventOnceAndInOrderWhenRecordedAtOnce: Events
// recorded from several goroutines at once (a Runner's batches beside the
// Hub's notes) reach a watcher in sequence order with none missing, since
// the watcher skips whatever is not after the last one it sent.
func TestAWatcherSeesEveryEventOnceAndInOrderWhenRecordedAtOnce(t *testing.T) {
	f := newFixture(t)
	s := f.create("hello")
	ch, cancel := f.o.Subscribe(s.ID)
	defer cancel()

	const writers, each = 8, 25 // 200 Events: within one watcher's buffer
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := f.o.Record(context.Background(), s.ID, protocol.Event{Kind: protocol.EventNote, Text: fmt.Sprintf("w%d e%d", w, i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var last int64
	timeout := time.After(30 * time.Second)
	for got := 0; got < writers*each; {
		select {
		case u, ok := <-ch:
			if !ok {
				t.Fatalf("the watcher was dropped after %d Events", got)
			}
			if u.Event == nil {
				continue
			}
			if last != 0 && u.Event.Seq != last+1 {
				t.Fatalf("Event %d reached the watcher after %d: a watcher skips it, so it is lost", u.Event.Seq, last)
			}
			last = u.Event.Seq
			got++
		case <-timeout:
			t.Fatalf("only %d of %d Events reached the watcher", got, writers*each)
		}
	}
	wg.Wait()
}
