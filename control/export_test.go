package control

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/gssh/gssh/job"
)

// CheckActive brings the active jobs the controller keeps from one pass
// to the next up to the store, as the next pass would (readActive), and
// says how they differ from what the store's Active reads now: nil when
// they are the same, queued ones and the others apart.
func (c *Controller) CheckActive() error {
	if err := c.readActive(); err != nil {
		return err
	}
	all, err := c.store.Active()
	if err != nil {
		return err
	}
	var queued, running []job.Job
	for _, j := range all {
		if j.State == job.Queued {
			queued = append(queued, j)
		} else {
			running = append(running, j)
		}
	}
	for _, p := range []struct {
		what       string
		kept, read []job.Job
	}{{"queued", c.act.queued, queued}, {"others", c.act.running, running}} {
		if len(p.kept) != len(p.read) {
			return fmt.Errorf("%s: %d jobs kept, %d in the store (%v, %v)", p.what, len(p.kept), len(p.read), ids(p.kept), ids(p.read))
		}
		for i := range p.kept {
			if !reflect.DeepEqual(p.kept[i], p.read[i]) {
				return fmt.Errorf("%s: job %d kept as\n%+v\nthe store has\n%+v", p.what, p.read[i].ID, p.kept[i], p.read[i])
			}
		}
	}
	a := &c.act
	if !slices.Equal(a.qids, ids(a.queued)) || !slices.Equal(a.rids, ids(a.running)) || len(a.ruses) != len(a.running) || len(a.rhost) != len(a.running) {
		return fmt.Errorf("the ids kept with the jobs are not theirs: %v %v (%d uses, %d hosts)", a.qids, a.rids, len(a.ruses), len(a.rhost))
	}
	var m marks
	for i := range a.queued {
		m.count(&a.queued[i], true, 1)
	}
	for i := range a.running {
		j := &a.running[i]
		m.count(j, false, 1)
		if a.ruses[i] != useOf(j) {
			return fmt.Errorf("job %d: use kept %+v, its record's %+v", j.ID, a.ruses[i], useOf(j))
		}
		if k := a.rhost[i]; k < 0 && j.Placement.Host != "" || k >= 0 && a.hosts.names[k] != j.Placement.Host {
			return fmt.Errorf("job %d: host kept %d, its record's %q", j.ID, k, j.Placement.Host)
		}
	}
	if m != a.marks {
		return fmt.Errorf("marks kept %+v, the jobs' %+v", a.marks, m)
	}
	return nil
}

func ids(js []job.Job) []job.ID {
	out := make([]job.ID, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}
