package hub

import (
	"reflect"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
)

// TestTheViewListsOfferedPortsLabelledAndNotListeningUntilTheyAre: an
// offered port nothing listens on is listed by its number and label, not
// listening, with no address; one that listens is the Runner's, with its
// label; a port only the Runner lists is as it was; all by number.
func TestTheViewListsOfferedPortsLabelledAndNotListeningUntilTheyAre(t *testing.T) {
	open := []protocol.Port{{Port: 9229, Addresses: []string{"127.0.0.1"}, Process: "node", PID: 7}, {Port: 3000, Addresses: []string{"0.0.0.0"}, Process: "vite", PID: 5}}
	offered := []protocol.OfferedPort{{Port: 8000, Label: "API"}, {Port: 3000, Label: "<b>Web</b>"}}
	want := []api.Port{
		{Port: open[1], Listening: true, Label: "<b>Web</b>"},
		{Port: protocol.Port{Port: 8000, Addresses: []string{}}, Label: "API"},
		{Port: open[0], Listening: true},
	}
	if got := labelled(open, offered); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}
