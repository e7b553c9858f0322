package notify

import (
	"encoding/json"
	"testing"
	"time"
)

// TestRetriesWaitTwiceAsLongEachTimeUpToAnHour: the wait before each retry
// doubles from the first, and never passes an hour however many tries.
func TestRetriesWaitTwiceAsLongEachTimeUpToAnHour(t *testing.T) {
	first := 30 * time.Second
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute}
	for tries, w := range want {
		if got := backoff(first, tries); got != w {
			t.Errorf("after %d tries: %v, want %v", tries, got, w)
		}
	}
	for _, tries := range []int{7, 8, 40, 1000} {
		if got := backoff(first, tries); got != time.Hour {
			t.Errorf("after %d tries: %v, want an hour", tries, got)
		}
	}
}

// TestASlackBodyEscapesWhatSlackReadsAsMarkup: the Session's title and the
// text can't make links or mentions of their own in Slack.
func TestASlackBodyEscapesWhatSlackReadsAsMarkup(t *testing.T) {
	ev := Event{Kind: QuestionWaiting, Text: "ping <!channel> & <https://evil.example|click>",
		Session: EventSession{Title: "a <b>", URL: "https://hub.example/sessions/s1"}}
	var got struct{ Text string }
	if err := json.Unmarshal(body(ev, FormatSlack), &got); err != nil {
		t.Fatal(err)
	}
	want := "*Claude asks* in <https://hub.example/sessions/s1|a &lt;b&gt;>: ping &lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;"
	if got.Text != want {
		t.Fatalf("slack text %q, want %q", got.Text, want)
	}
}

// TestAPostIsSignedAsGitHubSignsAWebhook: GitHub's documented example
// of X-Hub-Signature-256, so a receiver checks a post with the same code.
func TestAPostIsSignedAsGitHubSignsAWebhook(t *testing.T) {
	if got, want := Sign("It's a Secret to Everybody", []byte("Hello, World!")), "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Errorf("Sign = %s, want GitHub's %s", got, want)
	}
}
