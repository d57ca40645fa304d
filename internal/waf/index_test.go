package waf

import (
	"strings"
	"testing"

	coreruleset "github.com/corazawaf/coraza-coreruleset/v4"
	"github.com/corazawaf/coraza/v3"
	"github.com/corazawaf/coraza/v3/experimental"
	"github.com/corazawaf/coraza/v3/types"
)

// TestIndexAgreesWithCoraza: the paranoia levels read from the CRS text
// are the ones Coraza parses from the same files (its rule observer sees
// every rule it loads).
func TestIndexAgreesWithCoraza(t *testing.T) {
	idx, err := loadIndex(coreruleset.FS)
	if err != nil {
		t.Fatal(err)
	}
	levels := map[int]int{}
	for _, c := range categories {
		levels[c.prefix] = 4
	}
	var prefixes []int
	for p := range levels {
		prefixes = append(prefixes, p)
	}
	observed := map[int]int{}
	cfg := experimental.WAFConfigWithRuleObserver(coraza.NewWAFConfig(), func(r types.RuleMetadata) {
		for _, tag := range r.Tags() {
			if l, ok := strings.CutPrefix(tag, "paranoia-level/"); ok && r.ID()/1000 != 901 {
				observed[r.ID()] = int(l[0] - '0')
			}
		}
	})
	if _, err := coraza.NewWAF(cfg.WithRootFS(coreruleset.FS).WithDirectives(directivesFor(prefixes, levels, Options{MaxBodyBytes: 1, MaxHeadBytes: 1, MaxValues: 1}))); err != nil {
		t.Fatal(err)
	}
	if len(observed) < 200 {
		t.Fatalf("Coraza loaded %d tagged rules; the CRS has over 200", len(observed))
	}
	for id, l := range observed {
		if idx[id] != l {
			t.Errorf("rule %d: Coraza says level %d, the index %d", id, l, idx[id])
		}
	}
	for id := range idx {
		if _, ok := observed[id]; !ok {
			t.Errorf("rule %d is in the index, not in Coraza", id)
		}
	}
}
