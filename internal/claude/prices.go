package claude

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"kndl.dev/kndl/internal/errdefs"
)

// Tokens are the four counts of the Messages API's usage object.
type Tokens struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheRead  int64 `json:"cache_read_input_tokens"`
	CacheWrite int64 `json:"cache_creation_input_tokens"`
}

// Add adds u's counts to t's.
func (t *Tokens) Add(u Tokens) {
	t.Input += u.Input
	t.Output += u.Output
	t.CacheRead += u.CacheRead
	t.CacheWrite += u.CacheWrite
}

// Price is what a model's tokens cost, in US dollars per million tokens
// of each kind the Messages API counts.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// Cost is what u costs at p, in US dollars.
func (p Price) Cost(u Tokens) float64 {
	return (float64(u.Input)*p.Input + float64(u.Output)*p.Output +
		float64(u.CacheRead)*p.CacheRead + float64(u.CacheWrite)*p.CacheWrite) / 1e6
}

// Prices is the price table kept beside the models table (prices.json):
// an estimate, since a plan or a discount may charge otherwise.
type Prices struct {
	Note   string           `json:"note"`
	Prices map[string]Price `json:"prices"`
}

//go:embed prices.json
var pricesJSON []byte

var pinnedPrices = mustPrices(pricesJSON)

func mustPrices(data []byte) Prices {
	var p Prices
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		panic(fmt.Errorf("internal/claude/prices.json: %w: %w", err, errdefs.ErrInvalid))
	}
	return p
}

// PriceOf is the price of model by the table: its own row, or else the
// longest row its id starts with (a dated id such as
// claude-sonnet-5-5-20261101 costs what claude-sonnet-5-5 does). ok is
// false for a model the table does not price.
func PriceOf(model string) (p Price, ok bool) {
	best := ""
	for id, price := range pinnedPrices.Prices {
		if (model == id || strings.HasPrefix(model, id+"-")) && len(id) > len(best) {
			best, p, ok = id, price, true
		}
	}
	return p, ok
}

// EstimatedCost is what model's tokens u cost by the price table, in US
// dollars, and whether the model is priced (0 and false when not).
func EstimatedCost(model string, u Tokens) (float64, bool) {
	p, ok := PriceOf(model)
	return p.Cost(u), ok
}
