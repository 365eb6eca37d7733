// Command fakehelper stands in for gssh-helper in probe's tests (no cgo, no
// NVML): it prints a gssh.helper/v1 document with its own sha256, shaped by
// $FAKE_HELPER_MODE: ok (default), nolib (NVML init code 12), bogus
// (process records dropped), glibc (the loader's message, exit 1), garbage.
// With -watch D it prints the document every D until stdout is closed; in
// mode stall it then hangs after the first.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

func main() {
	b, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		os.Exit(2)
	}
	sum := sha256.Sum256(b)
	total, used, free := uint64(80<<30), uint64(1<<30), uint64(79<<30)
	gpu := map[string]any{"index": 0, "uuid": "GPU-00000000-0000-0000-0000-000000000000", "pci_bus_id": "00000000:07:00.0",
		"name": "NVIDIA A100-SXM4-80GB", "memory_total_bytes": total, "memory_used_bytes": used, "memory_free_bytes": free,
		"utilization_pct": 5, "temperature_c": 40, "health": "ok", "processes": []any{}, "processes_known": true}
	doc := map[string]any{"schema": "gssh.helper/v1", "helper_sha256": hex.EncodeToString(sum[:]), "driver_version": "535.161.08",
		"cuda_version": "12.2", "gpus": []any{gpu}, "warnings": []string{},
		"host": map[string]any{"cpus": 3, "cpu_ids": []int{0, 2, 5}, "memory_total_bytes": 64 << 30, "memory_available_bytes": 60 << 30}}
	switch os.Getenv("FAKE_HELPER_MODE") {
	case "nolib":
		doc = map[string]any{"schema": "gssh.helper/v1", "helper_sha256": hex.EncodeToString(sum[:]),
			"init_error": "ERROR_LIBRARY_NOT_FOUND", "init_code": 12, "gpus": []any{}, "warnings": []string{}}
	case "bogus":
		gpu["processes_known"] = false
		doc["processes_bogus"] = true
	case "glibc":
		fmt.Fprintln(os.Stderr, "/tmp/h: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required by /tmp/h)")
		os.Exit(1)
	case "garbage":
		fmt.Println("hello")
		return
	}
	if len(os.Args) == 3 && os.Args[1] == "-watch" {
		every, err := time.ParseDuration(os.Args[2])
		if err != nil {
			os.Exit(2)
		}
		for {
			if json.NewEncoder(os.Stdout).Encode(doc) != nil {
				return
			}
			if os.Getenv("FAKE_HELPER_MODE") == "stall" {
				time.Sleep(time.Hour)
			}
			time.Sleep(every)
		}
	}
	json.NewEncoder(os.Stdout).Encode(doc)
}
