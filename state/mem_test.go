package state_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/gssh/gssh/job"
	"github.com/gssh/gssh/state"
	"github.com/gssh/gssh/state/storetest"
)

func TestMem(t *testing.T) {
	storetest.Run(t, func(*testing.T) state.Store { return state.NewMem() })
}

func TestMemKeeper(t *testing.T) {
	storetest.RunKeeper(t, func(*testing.T) state.Keeper { return state.NewMem() })
}

func TestMemClusterIDsDiffer(t *testing.T) {
	a, _ := state.NewMem().ClusterID()
	b, _ := state.NewMem().ClusterID()
	if a == b {
		t.Errorf("two stores share cluster id %s", a)
	}
}

// Mem's changes (control.ChangeFeed): Changed returns the records written
// since a mark, each once, in id order, as Get has them, ended ones too;
// a mark another read made stale, or one Mem never gave, is refused.
func TestMemChanged(t *testing.T) {
	m := state.NewMem()
	ids := func(js []job.Job) (out []job.ID) {
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	a, _ := m.Submit(job.Job{User: "u", Spec: job.Spec{Argv: []string{"x"}}})
	mark := m.Mark()
	if js, next, ok := m.Changed(mark); !ok || len(js) != 0 || next != mark {
		t.Fatalf("nothing written: %v %d %v (mark %d)", ids(js), next, ok, mark)
	}
	b, _ := m.Submit(job.Job{User: "u", Spec: job.Spec{Argv: []string{"y"}}})
	for range 2 {
		if _, err := m.Update(b.ID, func(x *job.Job) error { x.Reason = "waits"; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Update(a.ID, func(x *job.Job) error { x.State = job.Cancelled; return nil }); err != nil {
		t.Fatal(err)
	}
	js, next, ok := m.Changed(mark)
	if !ok || !slices.Equal(ids(js), []job.ID{a.ID, b.ID}) || js[0].State != job.Cancelled || js[1].Reason != "waits" || next <= mark {
		t.Fatalf("changed since %d: %+v, next %d, %v", mark, js, next, ok)
	}
	if got, _ := m.Get(b.ID); !reflect.DeepEqual(got, js[1]) {
		t.Errorf("changed %+v, Get %+v", js[1], got)
	}
	if _, _, ok := m.Changed(next + 1); ok {
		t.Error("a mark never given was taken")
	}
	if _, err := m.Update(b.ID, func(x *job.Job) error { x.Reason = "still"; return nil }); err != nil {
		t.Fatal(err)
	}
	other := m.Mark() // another reader: the changes since next are forgotten
	if _, _, ok := m.Changed(next); ok {
		t.Error("a mark older than another reader's was taken")
	}
	if js, _, ok := m.Changed(other); !ok || len(js) != 0 {
		t.Errorf("changed since the other reader's mark: %v %v", ids(js), ok)
	}
}
