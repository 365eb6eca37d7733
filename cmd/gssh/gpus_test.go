package main

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gssh/gssh/labfile"
	"github.com/gssh/gssh/probe"
	"github.com/gssh/gssh/reap"
	"github.com/gssh/gssh/service"
)

func u64(v uint64) *uint64 { return &v }
func ip(v int) *int        { return &v }

func TestGPURowsOrderAndCells(t *testing.T) {
	reports := []service.HostGPUs{
		{Snapshot: probe.Snapshot{Host: "zeta", State: probe.HostUnreachable, Error: "connect to 10.0.0.9:22: no route to host"}},
		{Snapshot: probe.Snapshot{Host: "alpha", State: probe.HostOK, Warnings: []string{"infoROM"}, GPUs: []probe.GPU{
			{Index: 2, UUID: "GPU-2", Name: "A", MemUsed: u64(512 << 20), MemTotal: u64(80 << 30), UtilPct: ip(3), TempC: ip(30), Health: probe.HealthOK, ProcsKnown: true},
			{Index: 0, Name: "A", MemTotal: nil, MemoryState: "unified memory", Health: probe.HealthOK, ProcsKnown: true,
				Procs: []probe.Proc{{PID: 1, User: "bob"}, {PID: 2, User: "alice"}, {PID: 3, User: "bob"}, {PID: 4}}},
			{Index: 1, Health: probe.HealthLost, HealthWhy: "gone\n  away"},
		}}, Jobs: []service.GPUJob{{Index: 2, ID: "GPU-2", Job: 5, User: "ann"}}},
	}
	rows, warnings := gpuRows(reports, time.Now())
	want := [][]string{
		{"alpha", "0", "A", "? (unified memory)", "-", "-", "4 (?, alice, bob)", "-", "ok"},
		{"alpha", "1", "-", "-", "-", "-", "?", "-", "lost: gone away"},
		{"alpha", "2", "A", "512 MiB / 80.0 GiB", "3%", "30C", "0", "5 ann excl", "ok"},
		{"zeta", "-", "-", "-", "-", "-", "-", "-", "unreachable: connect to 10.0.0.9:22: no route to host"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows:\n got %q\nwant %q", rows, want)
	}
	if len(warnings) != 1 || warnings[0] != "alpha: infoROM" {
		t.Errorf("warnings %q", warnings)
	}
}

func TestPrintTablePlainWhenNotTTY(t *testing.T) {
	var b bytes.Buffer
	printTable(&b, false, []string{"A", "B"}, [][]string{{"x y", "1"}})
	if b.String() != "A\tB\nx y\t1\n" {
		t.Errorf("plain table %q", b.String())
	}
	b.Reset()
	printTable(&b, true, []string{"A", "B"}, [][]string{{"x y", "1"}})
	if strings.Contains(b.String(), "\t") || strings.Contains(b.String(), "\x1b[") || !strings.Contains(b.String(), "x y") {
		t.Errorf("terminal table %q", b.String())
	}
}

func TestExitCodes(t *testing.T) {
	for err, want := range map[error]int{
		nil: exitOK,
		&service.PartialError{Failed: 1, Total: 3}: exitPartial,
		errors.New("bad flag"):                     exitUsage,
		// gssh lab init on a host without fs.protected_hardlinks=1.
		fmt.Errorf("%w: fs.protected_hardlinks is 0", labfile.ErrDir): exitState,
	} {
		if got := exitCode(err); got != want {
			t.Errorf("exitCode(%v) = %d, want %d", err, got, want)
		}
	}
}

// An array task holding a GPU, or leaving an orphan, is named 1_3 in
// gssh gpus as in gssh ps; a job of its own by its id.
func TestGPUCellsNameTasks(t *testing.T) {
	task := &service.TaskRef{Array: 1, Task: 3}
	jobs := []service.GPUJob{{ID: "GPU-0", Job: 2, TaskRef: task, User: "root", BookedBytes: 2 << 30}, {ID: "GPU-0", Job: 5, User: "ann"}}
	if got, want := holdersCell(jobs, "GPU-0"), "1_3 root 2.0 GiB, 5 ann excl"; got != want {
		t.Errorf("GSSH JOBS %q, want %q", got, want)
	}
	if got, want := whose(service.ProcessDoc{Kind: reap.KindOrphan, Job: 2, TaskRef: task, Attempt: 1}), "orphan of job 1_3 (attempt 1)"; got != want {
		t.Errorf("WHOSE %q, want %q", got, want)
	}
}
