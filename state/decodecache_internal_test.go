package state

import (
	"reflect"
	"testing"
	"time"

	"github.com/gssh/gssh/job"
)

// fill sets every field reachable from v to a value that is not zero
// (pointers, slices and maps with one element), so that a copy that
// shares or drops anything is found.
func fill(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 4, 1, 2, 3, 4, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	}
}

// mutate changes every reference field reachable from v in place (a
// slice's elements, a pointer's target, a map's values).
func mutate(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			mutate(v.Index(i))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(it.Value())
			mutate(e)
			v.SetMapIndex(it.Key(), e)
		}
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Time{}))
			return
		}
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				mutate(v.Field(i))
			}
		}
	case reflect.String:
		v.SetString("changed")
	case reflect.Bool:
		v.SetBool(false)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(99)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(-1)
	}
}

// TestCloneJob: a clone of a job with every field set is equal to it and
// shares nothing with it: changing all of the clone leaves it as it was.
func TestCloneJob(t *testing.T) {
	var j job.Job
	fill(reflect.ValueOf(&j).Elem(), 0)
	var again job.Job
	fill(reflect.ValueOf(&again).Elem(), 0)
	c := cloneJob(j)
	if !reflect.DeepEqual(c, j) {
		t.Fatalf("the clone differs:\n%+v\n%+v", c, j)
	}
	mutate(reflect.ValueOf(&c).Elem())
	if !reflect.DeepEqual(j, again) {
		t.Errorf("changing the clone changed the job: it shares something with it")
	}
}
