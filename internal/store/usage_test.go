package store

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestAReplyIsCountedOnceInItsTurnAndSessionWhateverSendsItAgain: a
// reply's records (each with its usage, the last with the most) and a
// batch appended again, as after a Runner's reconnect, count each reply
// once, in the Turn it came in; a turn_end gets its Turn's sums; the sums
// by day are the Creator's own, or everyone's.
func TestAReplyIsCountedOnceInItsTurnAndSessionWhateverSendsItAgain(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, u := devSession(t, s)
		day := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
		reply := func(id, model string, in, out int64) Event {
			return Event{At: day, Kind: "text", Data: json.RawMessage(`{}`),
				Reply: &Reply{Message: id, Usage: Usage{Model: model, Input: in, Output: out, CacheRead: 10 * in, CacheWrite: 1}}}
		}
		var turnSums [][]Usage
		end := Event{At: day, Kind: "turn_end", Data: json.RawMessage(`{}`), SumTurn: func(u []Usage) (json.RawMessage, error) {
			turnSums = append(turnSums, u)
			return json.Marshal(len(u))
		}}
		if _, err := s.Sessions.AppendEvents(ctx, x.ID, []Event{{At: day, Kind: "turn_start", Data: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
		replies := []Event{reply("msg_a", "sonnet", 100, 1), // the first of msg_a's records, as its stream began
			reply("msg_a", "sonnet", 100, 40),
			reply("msg_b", "sonnet", 200, 60)}
		for range 2 { // the second time, a batch sent again
			if _, err := s.Sessions.AppendEvents(ctx, x.ID, replies); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := s.Sessions.AppendEvents(ctx, x.ID, []Event{end,
			{At: day, Kind: "turn_start", Data: json.RawMessage(`{}`)},
			reply("msg_c", "haiku", 5, 7), reply("msg_c", "haiku", 5, 7), end})
		if err != nil {
			t.Fatal(err)
		}
		sonnet := Usage{Model: "sonnet", Input: 300, Output: 100, CacheRead: 3000, CacheWrite: 2}
		haiku := Usage{Model: "haiku", Input: 5, Output: 7, CacheRead: 50, CacheWrite: 1}
		if want := [][]Usage{{sonnet}, {haiku}}; !reflect.DeepEqual(turnSums, want) {
			t.Errorf("the turn_ends' sums: got %+v, want %+v", turnSums, want)
		}
		if got := string(rows[0].Data); got != "1" {
			t.Errorf("the turn_end's data: got %s, want what SumTurn made", got)
		}
		if got, _ := s.Sessions.Events(ctx, x.ID, 0, 100); string(got[len(got)-1].Data) != "1" {
			t.Errorf("the stored turn_end's data: got %s, want what SumTurn made", got[len(got)-1].Data)
		}
		got, err := s.Usage.SessionUsage(ctx, x.ID)
		if want := []Usage{haiku, sonnet}; err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SessionUsage: got %+v, %v, want %+v", got, err, want)
		}
		turns, err := s.Usage.SessionTurnUsage(ctx, x.ID)
		if want := []TurnUsage{{1, sonnet}, {9, haiku}}; err != nil || !reflect.DeepEqual(turns, want) {
			t.Errorf("SessionTurnUsage: got %+v, %v, want %+v", turns, err, want)
		}

		// Another Member's Session in another Repo.
		other := invited(t, s, u.ID, "octo", 7)
		repo, _ := s.Repos.EnsureRepo(ctx, "/srv/other", "other")
		y, err := s.Sessions.CreateSession(ctx, Session{RepoID: repo.ID, CreatorID: other.ID, RunnerID: x.RunnerID, Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		next := reply("msg_a", "sonnet", 1, 2) // the same id in another Session is another reply
		next.At = day.Add(2 * time.Hour)
		if _, err := s.Sessions.AppendEvents(ctx, y.ID, []Event{next}); err != nil {
			t.Fatal(err)
		}
		// The list's sums: every row's in one query an idChunk of
		// Sessions, past a chunk's end too; none for a Session that spent
		// nothing.
		ids := []string{x.ID}
		for i := range idChunk {
			ids = append(ids, fmt.Sprintf("no-such-session-%d", i))
		}
		want := map[string][]Usage{x.ID: {haiku, sonnet}, y.ID: {{Model: "sonnet", Input: 1, Output: 2, CacheRead: 10, CacheWrite: 1}}}
		if got, err := s.Usage.SessionsUsage(ctx, append(ids, y.ID)); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SessionsUsage: got %+v, %v, want %+v", got, err, want)
		}
		mine := []UsageDay{{day.Truncate(24 * time.Hour), u.ID, x.RepoID, haiku}, {day.Truncate(24 * time.Hour), u.ID, x.RepoID, sonnet}}
		theirs := UsageDay{day.Truncate(24 * time.Hour).Add(24 * time.Hour), other.ID, repo.ID, Usage{Model: "sonnet", Input: 1, Output: 2, CacheRead: 10, CacheWrite: 1}}
		if got, err := s.Usage.UsageByDay(ctx, day.Add(-time.Hour), u.ID); err != nil || !reflect.DeepEqual(got, mine) {
			t.Errorf("UsageByDay of one Creator: got %+v, %v, want %+v", got, err, mine)
		}
		if got, err := s.Usage.UsageByDay(ctx, day.Add(-time.Hour), ""); err != nil || !reflect.DeepEqual(got, append([]UsageDay{theirs}, mine...)) {
			t.Errorf("UsageByDay of everyone: got %+v, %v, want %+v", got, err, append([]UsageDay{theirs}, mine...))
		}
		if got, err := s.Usage.UsageByDay(ctx, day.Add(24*time.Hour), ""); err != nil || !reflect.DeepEqual(got, []UsageDay{theirs}) {
			t.Errorf("UsageByDay since the next day: got %+v, %v, want %+v", got, err, []UsageDay{theirs})
		}
	})
}

// BenchmarkAppendingAReplyCountsItsUsage: one Session appending its
// transcript an Event at a time, each a reply of its own whose usage is
// counted (a row upserted in the same transaction), against the same
// Events with no usage.
func BenchmarkAppendingAReplyCountsItsUsage(b *testing.B) {
	for _, e := range benchEngines {
		for _, counted := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/counted=%v", e.name, counted), func(b *testing.B) {
				s := e.open(b)
				x, _ := devSession(b, s)
				ev := Event{Kind: "text", Data: json.RawMessage(`{"text":"a line of the transcript"}`)}
				b.ResetTimer()
				for i := range b.N {
					if counted {
						ev.Reply = &Reply{Message: fmt.Sprintf("msg_%d", i), Usage: Usage{Model: "m", Input: 1000, Output: 50, CacheRead: 9000, CacheWrite: 10}}
					}
					if _, err := s.Sessions.AppendEvents(context.Background(), x.ID, []Event{ev}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			})
		}
	}
}
