package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/tied"
)

// TestAStandbyTakesOverALoadLosingNothing runs the load on PostgreSQL
// against a Hub in a child process, with a second child on the same store
// and address waiting as a standby, as kndl hub does (the store's lease),
// and kills the first with SIGKILL two thirds of the way through the
// prompts, its store's transactions counted before and after (20 s of
// them on 2 Runners, 40 Sessions with 2 watchers each, a quarter awake, 12
// prompts a minute each, so Turns run as it dies). The standby must serve
// within 10 s of the kill; every simulated Runner must connect to it; every
// prompt the Hubs accepted must reach its Runner once, in order, byte for
// byte (simrunner's check; a prompt whose request the kill cut is sent
// again only if neither Hub took it); every watcher must dial again and
// see every Event once, in seq order, to the store's last. The load
// test's knobs (KNDL_LOAD_RUNNERS, _SESSIONS, _WATCHERS, _PPM, _SECONDS)
// make docs/performance.md's standby run.
func TestAStandbyTakesOverALoadLosingNothing(t *testing.T) {
	src := testenv.Postgres(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // both Hubs listen there, the standby once it took over
	env := []string{hubChildListen + "=" + addr, hubChildKey + "=" + seal.NewKey()}
	active := startHubChild(t, src, env...)
	url, token := active.serving(t)
	standby := startHubChild(t, src, env...)
	if f := standby.line(t); len(f) != 1 || f[0] != "standby" {
		t.Fatalf("the second Hub said %q, want standby", f)
	}

	var (
		mu                  sync.Mutex
		tookOver, reconnect time.Duration
		killed              time.Time
		died                time.Duration // the killed Hub's process gone, its sockets closed
		connected, runners  int
		// The store's transactions (a read is one): over a window before
		// the kill, and twice as long after it.
		before, after int64
		window        time.Duration // a sixth of the prompts' phase
	)
	xacts := pgXacts(t, src)
	c := &apiclient.Client{BaseURL: url, Token: token, HTTP: &http.Client{Timeout: 5 * time.Second}}
	kill := func(ctx context.Context) {
		x0 := xacts(ctx)
		pause(ctx, window)
		x1 := xacts(ctx)
		defer func() {
			pause(ctx, time.Until(killed.Add(2*window)))
			x2 := xacts(ctx)
			mu.Lock()
			before, after = x1-x0, x2-x1
			mu.Unlock()
		}()
		if err := active.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Errorf("SIGKILL the active Hub: %v", err)
			return
		}
		mu.Lock()
		killed = time.Now()
		mu.Unlock()
		t.Logf("SIGKILLed the active Hub at %s", killed.UTC().Format("15:04:05.000"))
		// The kernel ends a killed process's threads and closes its
		// files (its thousands of sockets, its store connections, whose
		// end frees the lease) before it has exited: that much of the
		// takeover is the dying, not the standby.
		go func() {
			tied.WaitExited(active.cmd.Process.Pid)
			mu.Lock()
			died = time.Since(killed)
			mu.Unlock()
		}()
		// Its own pace: a poll of the Hubs' address, not a wait for a
		// condition of this process's.
		for ctx.Err() == nil && time.Since(killed) < time.Minute {
			asked := time.Now()
			resp, err := c.HTTP.Get(url + "/health")
			if err == nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				resp.Body.Close()
				err = fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
			}
			// Each answer but a refusal: why the standby listens yet is
			// not healthy, and what the one that was took (its checks'
			// times in it).
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Logf("/health asked at %s: %v after %v", asked.UTC().Format("15:04:05.000"), err, time.Since(asked).Round(time.Millisecond))
			}
			if resp != nil && resp.StatusCode == http.StatusOK {
				break
			}
			pause(ctx, 20*time.Millisecond)
		}
		took := time.Since(killed)
		for ctx.Err() == nil && time.Since(killed) < time.Minute {
			rs, err := c.Runners(ctx)
			up, all := 0, 0
			for _, r := range rs {
				if strings.HasPrefix(r.Name, "load-") {
					all++
					if r.Connected {
						up++
					}
				}
			}
			mu.Lock()
			tookOver, reconnect, connected, runners = took, time.Since(killed), up, all
			mu.Unlock()
			if err == nil && up == all {
				return
			}
			pause(ctx, 50*time.Millisecond)
		}
	}
	o := withKnobs(t, Options{HubURL: url, Token: token, Runners: 2, Sessions: 40, Watchers: 2,
		PromptsPerMinute: 12, Duration: 20 * time.Second, AwakeFraction: 0.25, HubPID: active.cmd.Process.Pid, During: kill})
	window = o.Duration / 6
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	mu.Lock()
	defer mu.Unlock()
	back, missing := watchersBack(rep.Opened, killed)
	opened := socketsOpened(rep.Opened, killed, killed.Add(2*window))
	t.Logf("load average %s\n%s  SIGKILL of the active Hub: its process gone in %v; the standby served in %v, its %d of %d Runners connected in %v; its watchers' first message p50 %v, p99 %v, all %v",
		loadAverage(), b.String(), died.Round(time.Millisecond), tookOver.Round(time.Millisecond), connected, runners, reconnect.Round(time.Millisecond), back.P50, back.P99, back.Max)
	t.Logf("  the store's transactions: %d in the %v before the kill; %d in the %v after it, in which %d watchers' sockets opened: %.1f a socket, less twice those before",
		before, window, after, 2*window, opened, float64(after-2*before)/float64(max(opened, 1)))
	if missing > 0 {
		t.Errorf("%d watchers had no socket opened on the standby", missing)
	}
	if tookOver == 0 || tookOver > 10*time.Second {
		t.Errorf("the standby served %v after the kill, want within 10 s", tookOver)
	}
	if connected != o.Runners || runners != o.Runners {
		t.Errorf("got %d of %d simulated Runners connected to the standby, want all %d", connected, runners, o.Runners)
	}
	if len(rep.Errors) > 0 {
		t.Errorf("got %d errors, want none", len(rep.Errors))
	}
	if want := o.Sessions * o.Watchers; rep.Reconnects < want {
		t.Errorf("got %d watchers' sockets dialled again, want at least one for each of the %d", rep.Reconnects, want)
	}
	if rep.Prompts == 0 {
		t.Errorf("got no prompts sent, want some")
	}
}

// watchersBack is, over the watchers, the time from killed to the first
// message of each one's first socket opened after it, and how many opened
// none.
func watchersBack(opened [][]time.Time, killed time.Time) (q Quantiles, missing int) {
	var ds []time.Duration
	for _, ts := range opened {
		i := slices.IndexFunc(ts, func(at time.Time) bool { return at.After(killed) })
		if i < 0 {
			missing++
			continue
		}
		ds = append(ds, ts[i].Sub(killed))
	}
	return quantiles(ds), missing
}

// socketsOpened counts the watchers' sockets whose first message came
// between from and to.
func socketsOpened(opened [][]time.Time, from, to time.Time) int {
	n := 0
	for _, ts := range opened {
		for _, at := range ts {
			if at.After(from) && at.Before(to) {
				n++
			}
		}
	}
	return n
}

// pgXacts returns a reader of the PostgreSQL store's transactions so far,
// committed and rolled back (each read outside a transaction is one);
// PostgreSQL counts them within a second.
func pgXacts(t *testing.T, src string) func(context.Context) int64 {
	cfg, err := pgx.ParseConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	return func(ctx context.Context) int64 {
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
			t.Errorf("the store's transactions: %v", err)
		}
		return n
	}
}
