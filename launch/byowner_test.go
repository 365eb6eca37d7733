package launch

import (
	"reflect"
	"testing"
)

// byOwner keeps the users' first-seen order and each item's index; with
// no sudo, everything is the login's.
func TestByOwner(t *testing.T) {
	items := []string{"alice:1", "bob:2", "alice:3", ":4"}
	owner := func(s string) string { return s[:len(s)-2] }
	got := byOwner(items, true, owner)
	want := []ownerGroup[string]{
		{User: "alice", Items: []string{"alice:1", "alice:3"}, At: []int{0, 2}},
		{User: "bob", Items: []string{"bob:2"}, At: []int{1}},
		{User: "", Items: []string{":4"}, At: []int{3}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sudo: %+v, want %+v", got, want)
	}
	if got := byOwner(items, false, owner); len(got) != 1 || got[0].User != "" || len(got[0].Items) != 4 {
		t.Errorf("login: %+v, want one group of all", got)
	}
}
