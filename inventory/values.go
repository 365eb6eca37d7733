package inventory

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gssh/gssh/units"
	"go.yaml.in/yaml/v3"
)

// oneOf reads a scalar that must be one of known.
func oneOf[T ~string](p parser, v *yaml.Node, what string, known ...T) (T, error) {
	var zero T
	names := make([]string, len(known))
	for i, k := range known {
		names[i] = string(k)
		if v.Kind == yaml.ScalarNode && v.Value == string(k) {
			return k, nil
		}
	}
	return zero, p.errf(v, "%s %s: give one of %s", what, kindName(v), strings.Join(names, ", "))
}

// duration reads a duration of at least least (and more than 0): a Go
// duration (24h, 90m) or Slurm's [D-]HH:MM:SS, a bare number being
// minutes, as for --timeout.
func (p parser) duration(v *yaml.Node, what string, least time.Duration) (time.Duration, error) {
	const help = "give a Go duration (24h, 90m) or Slurm's [D-]HH:MM:SS (7-00:00:00; a bare number is minutes)"
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return 0, p.errf(v, "%s %s: %s", what, kindName(v), help)
	}
	d, err := units.ParseDuration(v.Value)
	if err != nil {
		if g, gerr := time.ParseDuration(v.Value); gerr == nil && g <= 0 || strings.Trim(v.Value, "0") == "" || strings.HasPrefix(v.Value, "-") {
			return 0, p.errf(v, "%s %q: give a duration more than 0, such as 24h, 90m or 7-00:00:00", what, v.Value)
		}
		return 0, p.errf(v, "%s %q is not a duration: %s", what, v.Value, help)
	}
	if d < least {
		return 0, p.errf(v, "%s %q: give at least %s (less would make usage meaningless)", what, v.Value, least)
	}
	return d, nil
}

// age reads a keep_* duration: days or weeks (90d, 2w) or a duration as
// p.duration takes it, at least 1s (passes are seconds apart).
func (p parser) age(v *yaml.Node, what string) (time.Duration, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return 0, p.errf(v, "%s %s: %s", what, kindName(v), units.AgeHelp)
	}
	d, err := units.ParseAge(v.Value)
	if err != nil {
		if g, gerr := time.ParseDuration(v.Value); gerr == nil && g <= 0 || strings.Trim(v.Value, "0dw") == "" || strings.HasPrefix(v.Value, "-") {
			return 0, p.errf(v, "%s %q: give a duration more than 0, such as 90d, 36h or 14-00:00:00", what, v.Value)
		}
		return 0, p.errf(v, "%s %q is not a duration: %s", what, v.Value, units.AgeHelp)
	}
	if d < time.Second {
		return 0, p.errf(v, "%s %q: give at least 1s (passes are seconds apart)", what, v.Value)
	}
	return d, nil
}

// unique turns down a mapping that gives a key twice (YAML allows it when
// read into nodes, and the second would silently win).
func (p parser) unique(m *yaml.Node, where string) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if first, dup := seen[k.Value]; dup {
			return p.errf(k, "%q is given twice in %s (first at line %d); keep one", k.Value, where, first)
		}
		seen[k.Value] = k.Line
	}
	return nil
}

func (p parser) str(v *yaml.Node, what string) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || strings.TrimSpace(v.Value) == "" {
		return "", p.errf(v, "`%s` must be a non-empty string", what)
	}
	return v.Value, nil
}

func (p parser) boolean(v *yaml.Node, what string) (bool, error) {
	if v.Kind == yaml.ScalarNode {
		switch strings.ToLower(v.Value) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
	}
	return false, p.errf(v, "`%s` must be true or false, found %q", what, v.Value)
}

// ParsePercent reads "10%", "10" or "12.5%" as a percentage in [0, 100).
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f >= 100 {
		return 0, fmt.Errorf("percentage %q: expected a number from 0 to 99, e.g. 10%%", s)
	}
	return f, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "something else"
}
