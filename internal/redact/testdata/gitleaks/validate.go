// This file replaces cmd/generate/config/utils/validate.go in a copy of
// gitleaks' module (TestGitleaksCorpus): where gitleaks checks each rule
// against its examples, it writes them out, one rule a line of JSON, with
// what the rule finds in each true positive and, for each false positive,
// whether gitleaks' whole default ruleset finds anything in it (many are
// another rule's true positives).

package utils

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/zricethezav/gitleaks/v8/cmd/generate/config/base"
	"github.com/zricethezav/gitleaks/v8/config"
	"github.com/zricethezav/gitleaks/v8/detect"
)

type example struct {
	Line    string   `json:"line"`
	Secrets []string `json:"secrets"`
	Matches []string `json:"matches"`
}

// all is gitleaks with its default config, made once.
var all *detect.Detector

func emit(r *config.Rule, tps, fps []string) *config.Rule {
	if all == nil {
		var err error
		if all, err = detect.NewDetectorDefaultConfig(); err != nil {
			panic(err)
		}
	}
	d := createSingleRuleDetector(r)
	var ex []example
	for _, tp := range tps {
		e := example{Line: tp}
		for _, f := range d.DetectString(tp) {
			e.Secrets = append(e.Secrets, f.Secret)
			e.Matches = append(e.Matches, f.Match)
		}
		ex = append(ex, e)
	}
	var flagged []bool
	for _, fp := range fps {
		flagged = append(flagged, len(all.DetectString(fp)) > 0)
	}
	b, err := json.Marshal(map[string]any{"id": r.RuleID, "truePositives": ex, "falsePositives": fps, "flaggedByGitleaks": flagged})
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(b, '\n'))
	return r
}

func Validate(rule config.Rule, truePositives []string, falsePositives []string) *config.Rule {
	return emit(&rule, truePositives, falsePositives)
}

func ValidateWithPaths(rule config.Rule, truePositives map[string]string, falsePositives map[string]string) *config.Rule {
	return emit(&rule, slices.Sorted(maps.Values(truePositives)), slices.Sorted(maps.Values(falsePositives)))
}

// createSingleRuleDetector is gitleaks' own, from the file this replaces.
func createSingleRuleDetector(r *config.Rule) *detect.Detector {
	uniq := map[string]struct{}{}
	var kws []string
	for _, k := range r.Keywords {
		k = strings.ToLower(k)
		if _, ok := uniq[k]; !ok {
			uniq[k] = struct{}{}
			kws = append(kws, k)
		}
	}
	r.Keywords = kws
	cfg := base.CreateGlobalConfig()
	cfg.Rules = map[string]config.Rule{r.RuleID: *r}
	cfg.Keywords = uniq
	for _, a := range cfg.Allowlists {
		if err := a.Validate(); err != nil {
			panic(err)
		}
	}
	return detect.NewDetector(cfg)
}
