package state_test

import (
	"testing"

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
