package trace

import (
	"fmt"
	"math"
	"time"
)

// Scale multiplies every job's Submit by factor, which must be more than
// 0 and finite (Scale panics otherwise): below 1 the jobs arrive closer
// together and the load rises, above 1 it falls. Durations stay as they
// are. Submit times are rounded to the nanosecond and capped at the
// largest time.Duration; the order of the jobs does not change.
func (t *Trace) Scale(factor float64) {
	if !(factor > 0) || math.IsInf(factor, 1) {
		panic(fmt.Sprintf("trace: Scale factor must be more than 0 and finite, got %v", factor))
	}
	for i := range t.Jobs {
		s := math.Round(float64(t.Jobs[i].Submit) * factor)
		if s >= math.MaxInt64 {
			t.Jobs[i].Submit = math.MaxInt64
		} else {
			t.Jobs[i].Submit = time.Duration(s)
		}
	}
}

// Span is the time from the first job's submit to the last one's; 0 for a
// trace with fewer than two jobs.
func (t *Trace) Span() time.Duration {
	if len(t.Jobs) == 0 {
		return 0
	}
	return t.Jobs[len(t.Jobs)-1].Submit - t.Jobs[0].Submit
}

// GPUSeconds is the work the trace offers, in GPU-seconds: the sum of
// GPUs × Fraction × Duration (in seconds) over the jobs with GPUs <=
// maxGPUs, the ones that a lab whose largest host has maxGPUs GPUs can
// place. It is 0 when maxGPUs < 1.
func (t *Trace) GPUSeconds(maxGPUs int) float64 {
	var sum float64
	for _, j := range t.Jobs {
		if j.GPUs <= maxGPUs {
			sum += float64(j.GPUs) * j.Fraction * j.Duration.Seconds()
		}
	}
	return sum
}

// Load is the average share of a lab of labGPUs GPUs that the placeable
// jobs (see GPUSeconds) ask for over the trace's span:
// GPUSeconds(maxGPUs) / (labGPUs × Span in seconds). 1 means the jobs
// would keep every GPU busy. Load is 0, not +Inf, when the span is 0 (one
// job, or all jobs submitted at once: there is no rate to speak of) or
// labGPUs < 1.
func (t *Trace) Load(labGPUs, maxGPUs int) float64 {
	span := t.Span().Seconds()
	if span <= 0 || labGPUs < 1 {
		return 0
	}
	return t.GPUSeconds(maxGPUs) / (float64(labGPUs) * span)
}

// ScaleToLoad scales the submit times (see Scale) so that Load(labGPUs,
// maxGPUs) becomes target, and returns the factor used. Load is inversely
// proportional to the span, so the factor is the trace's own load divided
// by target. target must be more than 0 and finite ("--load must be more
// than 0"), labGPUs at least 1, and the trace must have a load to scale:
// a span above 0 and at least one job of maxGPUs GPUs or fewer. On error
// the trace is left as it was and the factor is 0.
func (t *Trace) ScaleToLoad(target float64, labGPUs, maxGPUs int) (factor float64, err error) {
	switch {
	case !(target > 0):
		return 0, fmt.Errorf("--load must be more than 0, got %v", target)
	case math.IsInf(target, 1):
		return 0, fmt.Errorf("--load must be a finite number, got %v", target)
	case labGPUs < 1:
		return 0, fmt.Errorf("the lab must have at least 1 GPU, got %d", labGPUs)
	case t.Span() <= 0:
		return 0, fmt.Errorf("%s: all jobs are submitted at the same time (span 0 s); there is no load to scale", t.label())
	}
	natural := t.Load(labGPUs, maxGPUs)
	if natural == 0 {
		return 0, fmt.Errorf("%s: no job asks for %d GPUs or fewer; there is no load to scale", t.label(), maxGPUs)
	}
	factor = natural / target
	if !(factor > 0) || math.IsInf(factor, 1) {
		return 0, fmt.Errorf("%s: --load %v is out of reach: the trace's own load is %v", t.label(), target, natural)
	}
	t.Scale(factor)
	return factor, nil
}
