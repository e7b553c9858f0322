package session

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// Owner is closed, every fake Runner gone. A test that runs over
// overrun is stopped by the watchdog, with every goroutine printed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(watchdog{m})
}

// overrun is how long one test may run before the watchdog calls it hung:
// a test here takes well under a second, and 200 runs beside two busy
// loops must not stall for go test's whole -timeout with nothing said.
const overrun = 60 * time.Second

// running is the test whose fixture was made last (newFixture): the
// watchdog's only way to name it. A plain value, not a channel, as the
// test sets it from inside its synctest bubble and the watchdog reads it
// from outside.
var running atomic.Pointer[string]

// watched tells the watchdog t runs, until it ends.
func watched(t *testing.T) {
	name := t.Name()
	running.Store(&name)
	t.Cleanup(func() { running.CompareAndSwap(&name, nil) })
}

// watchdog runs the tests with a goroutine, outside every bubble and on
// the real clock, that prints all goroutines and exits once one test has
// run for overrun. It ends before goleak looks.
type watchdog struct{ m *testing.M }

func (w watchdog) Run() int {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var seen *string
		var since time.Time
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				cur := running.Load()
				if cur != seen {
					seen, since = cur, now
				}
				if cur != nil && now.Sub(since) > overrun {
					buf := make([]byte, 8<<20)
					buf = buf[:runtime.Stack(buf, true)]
					fmt.Fprintf(os.Stderr, "--- FAIL: %s ran over %s: hung; every goroutine:\n\n%s\n", *cur, overrun, buf)
					os.Exit(2)
				}
			}
		}
	}()
	code := w.m.Run()
	close(done)
	<-ended
	return code
}
