package probe

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ListedGPU is one GPU of `nvidia-smi -L` and its MIG devices.
type ListedGPU struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	UUID  string `json:"uuid"` // "" when the driver prints `GPU-` alone (corpus 020)
	MIG   []MIG  `json:"mig_devices,omitempty"`
}

// ParseList parses the output of `nvidia-smi -L`:
//
//	GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)
//	  MIG 3g.40gb     Device  0: (UUID: MIG-…)
//
// MIG lines belong to the GPU line above them; their memory is not in this
// output and stays nil. Lines of another form are left out and reported in
// the error as "row N: ...".
func ParseList(data []byte) ([]ListedGPU, error) {
	gpus, errs := parseList(splitLines(data))
	return gpus, errors.Join(errs...)
}

// parseList is ParseList over numbered lines.
func parseList(lines []line) ([]ListedGPU, []error) {
	gpus := []ListedGPU{}
	var errs []error
	for _, l := range lines {
		s := strings.TrimSpace(l.text)
		var err error
		switch {
		case s == "":
		case strings.HasPrefix(s, "GPU "):
			var g ListedGPU
			if g, err = parseListGPU(s); err == nil {
				gpus = append(gpus, g)
			}
		case strings.HasPrefix(s, "MIG "):
			var m MIG
			if m, err = parseListMIG(s); err == nil {
				if len(gpus) == 0 {
					err = errors.New("MIG device before any GPU")
				} else {
					parent := &gpus[len(gpus)-1]
					parent.MIG = append(parent.MIG, m)
				}
			}
		default:
			err = fmt.Errorf("not a GPU or MIG line: %q", clip(s))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("row %d: %w", l.n, err))
		}
	}
	return gpus, errs
}

// parseListGPU reads `GPU 0: NAME (UUID: GPU-…)`.
func parseListGPU(s string) (ListedGPU, error) {
	idx, rest, ok := strings.Cut(strings.TrimPrefix(s, "GPU "), ": ")
	n, err := strconv.Atoi(idx)
	if !ok || err != nil || n < 0 || n >= maxGPUs {
		return ListedGPU{}, fmt.Errorf("GPU line without an index: %q", clip(s))
	}
	name, uuid := cutUUID(rest)
	return ListedGPU{Index: n, Name: name, UUID: gpuUUID(uuid)}, nil
}

// parseListMIG reads `MIG 3g.40gb     Device  0: (UUID: MIG-…)`, and the
// older `MIG 3g.20gb Device 0: (UUID: MIG-GPU-…/1/0)`.
func parseListMIG(s string) (MIG, error) {
	head, uuid := cutUUID(s)
	f := strings.Fields(head)
	if len(f) != 4 || f[2] != "Device" || !strings.HasSuffix(f[3], ":") {
		return MIG{}, fmt.Errorf("MIG line not of the form `MIG PROFILE Device N: (UUID: …)`: %q", clip(s))
	}
	n, err := strconv.Atoi(strings.TrimSuffix(f[3], ":"))
	if err != nil || n < 0 {
		return MIG{}, fmt.Errorf("MIG line without a device number: %q", clip(s))
	}
	return MIG{Index: n, UUID: uuid, Profile: f[1]}, nil
}

// cutUUID splits `TEXT (UUID: X)` into TEXT and X. Names may hold
// parentheses, so the last "(UUID: " counts.
func cutUUID(s string) (text, uuid string) {
	i := strings.LastIndex(s, "(UUID: ")
	if i < 0 || !strings.HasSuffix(s, ")") {
		return strings.TrimSpace(s), ""
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+len("(UUID: ") : len(s)-1])
}
