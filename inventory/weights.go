package inventory

import (
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gssh/gssh/sched"
)

var weightKeys = []string{"fairshare", "age", "size"}

// maxFactorWeight bounds a factor's weight: far beyond what any policy
// needs, and what a table prints.
const maxFactorWeight = 1e6

// weights reads `policy weights:` into w: a mapping of fairshare, age and
// size to numbers of 0 or more, at least one more than 0. A factor left
// out weighs 0 (give fairshare: 1 to keep it); the block left out gives
// sched.DefaultWeights.
func (p parser) weights(m *yaml.Node, w *sched.Weights) error {
	const example = "such as `{fairshare: 1, age: 0.5, size: 0.1}`"
	if m.Kind != yaml.MappingNode {
		return p.errf(m, "`policy weights` must be a mapping %s, found %s", example, kindName(m))
	}
	if err := p.unique(m, "`policy weights`"); err != nil {
		return err
	}
	*w = sched.Weights{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if !slices.Contains(weightKeys, k.Value) {
			return p.errf(k, "unknown key %q in `policy weights`; it takes %s (each a number of 0 or more)", k.Value, strings.Join(weightKeys, ", "))
		}
		x, err := strconv.ParseFloat(v.Value, 64)
		if v.Kind != yaml.ScalarNode || v.Tag != "!!int" && v.Tag != "!!float" || err != nil || !(x >= 0 && x <= maxFactorWeight) {
			return p.errf(v, "policy weights %s %s: give a number from 0 to 1000000, such as 1 or 0.5 (the factor's weight in a job's priority)", k.Value, kindName(v))
		}
		switch k.Value {
		case "fairshare":
			w.FairShare = x
		case "age":
			w.Age = x
		case "size":
			w.Size = x
		}
	}
	if *w == (sched.Weights{}) {
		return p.errf(m, "`policy weights` are all 0: give at least one factor a weight more than 0, %s, or leave weights out for the defaults", example)
	}
	return nil
}
