package sched

import (
	"fmt"
	"testing"

	"github.com/gssh/gssh/gpuinfo"
)

func TestValidate(t *testing.T) {
	small := host("gpu01", gpus(2, 24*GiB)...)
	small.Labels = []string{"h100"}
	big := host("gpu02", gpus(8, 80*GiB)...)
	big.Labels = []string{"nvlink", "a100"}
	down := host("gpu03")
	down.Snapshot.State = gpuinfo.HostUnreachable
	drained := big
	drained.Drain = true
	mig := host("gpu04", migGPU(0), gpu(1, 80*GiB))
	noMem := host("gpu05", gpu(0, 80*GiB))
	noMem.Snapshot.GPUs[0].MemTotal, noMem.Snapshot.GPUs[0].MemoryState = nil, "insufficient permissions"
	four := host("gpu06", gpus(4, 24*GiB)...)
	none := host("gpu07")
	none.Snapshot.State = gpuinfo.HostNoDevices

	for _, tt := range []struct {
		name  string
		nodes []Host
		req   Request
		err   string // "" = valid
	}{
		{"fits", []Host{small, big}, shared(8, 60*GiB), ""},
		{"busy and drained hosts still count", []Host{drained}, excl(8), ""},
		{"a host not known now could fit", []Host{small, down}, excl(64), ""},
		{"no GPUs asked", []Host{small}, excl(0), "0 GPUs requested: ask for at least 1"},
		{"no hosts", nil, excl(1), "no hosts to run on: list some in the inventory"},
		{"unknown host", []Host{big, small}, Request{Host: "gpu09", GPUs: 1}, `unknown host "gpu09"; the hosts are gpu01, gpu02`},
		{"unknown label", []Host{big, small}, Request{Host: "auto", Labels: []string{"a100", "h200"}, GPUs: 1}, "no host has labels a100, h200; the labels in use are a100, h100, nvlink"},
		{"no labels anywhere", []Host{none}, Request{Labels: []string{"a100"}, GPUs: 1}, "no host has label a100 (no host has any label)"},
		{"the host lacks the label", []Host{big, small}, Request{Host: "gpu01", Labels: []string{"a100"}, GPUs: 1}, "host gpu01 lacks label a100 (it has label h100)"},
		{"too many GPUs", []Host{small, big}, excl(16), "16 GPUs requested, but the most on one host is 8 (gpu02)"},
		{"too many GPUs on the host", []Host{small, big}, Request{Host: "gpu01", GPUs: 4}, "4 GPUs requested, but gpu01 has 2"},
		{"no GPUs anywhere", []Host{none}, excl(1), "1 GPU requested, but no host has any"},
		{"no GPUs on the host", []Host{none}, Request{Host: "gpu07", GPUs: 1}, "1 GPU requested, but gpu07 has none"},
		{"MIG devices take 1-GPU jobs", []Host{mig}, excl(2), "2 GPUs requested, but the most on one host is 1 (gpu04); MIG devices take 1-GPU jobs only"},
		{"a MIG device takes a 1-GPU job", []Host{mig}, shared(1, 70*GiB), ""},
		{"too much memory", []Host{small, big}, shared(1, 100*GiB), "100.0 GiB per GPU requested, but the most a GPU can give is 72.0 GiB (gpu02: 80.0 GiB total, 10% reserved)"},
		{"too much memory on that many GPUs", []Host{big, four}, shared(4, 30*GiB), ""},
		{"too much memory on that many GPUs of one host", []Host{small, four}, shared(4, 30*GiB), "30.0 GiB per GPU requested, but the most 4 GPUs of one host can each give is 21.6 GiB (gpu06: 24.0 GiB total, 10% reserved)"},
		{"memory unknown", []Host{noMem}, shared(1, GiB), "1.0 GiB per GPU requested, but no GPU reports its memory (insufficient permissions); leave --mem out to take whole GPUs"},
		{"memory unknown, exclusive", []Host{noMem}, excl(1), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.nodes, tt.req)
			if got := fmt.Sprint(err); (err == nil) != (tt.err == "") || err != nil && got != tt.err {
				t.Errorf("Validate:\n got %v\nwant %s", err, tt.err)
			}
		})
	}
}
