# gssh: `make` builds bin/gssh, bin/gssh-helper and bin/gssh-plot; `make test`
# runs everything CI runs.
GO       ?= go
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
FUZZ_TIME ?= 10s
PKGS     := ./...
# go-nvml's header marks many NVML calls deprecated: without this, every
# cgo build of the helper prints hundreds of warning lines.
CGO_CFLAGS ?= -Wno-deprecated-declarations
export CGO_CFLAGS

.PHONY: all build helper plot demo test test-clock vet fmt-check tidy-check unit bench fuzz gpu-test clean

all: build helper plot

# gssh itself: static, no cgo, starts on any Linux machine.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/gssh ./cmd/gssh

# gssh-helper: cgo against go-nvml, lazily bound (never -z now, never -static:
# both break on hosts without a driver). gssh finds it beside itself.
helper:
	CGO_ENABLED=1 $(GO) build -trimpath -ldflags "-s -w" -o bin/gssh-helper ./cmd/gssh-helper

# gssh-plot: draws gssh sim --plot's SVG (gonum.org/v1/plot, its fonts and
# back ends stay out of gssh). gssh finds it beside itself.
plot:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o bin/gssh-plot ./cmd/gssh-plot

# A simulated lab on this machine (no GPU, no hosts): gssh demo's tour.
demo: build
	bin/gssh demo --run

# Everything CI runs. Tests start real OpenSSH sshd on loopback: with CI=true a
# missing sshd fails the run instead of skipping (.ci/run installs it).
test: fmt-check vet tidy-check unit

# -tags gssh_test: gssh's test hooks (cmd/gssh/testhooks.go: a clock to
# shift, the machine-wide inventory moved), which only tests build.
# -p 4: netfault and launch mostly wait on timeouts and real sessions (a
# few CPU-seconds in 30-40 s): four packages at a time keep both cores busy.
unit:
	$(GO) test -race -count=1 -p 4 -tags gssh_test $(PKGS)

# The CLI scripts at 23:30 and at 00:30 UTC on gssh's clock (the test
# build's GSSH_TEST_CLOCK, set from GSSH_TEST_NOW): no script may depend
# on the time of day it runs at.
test-clock:
	GSSH_TEST_NOW=$$(date -u +%Y-%m-%dT23:30:00Z) $(GO) test -count=1 -tags gssh_test -run TestScripts ./cmd/gssh/
	GSSH_TEST_NOW=$$(date -u -d tomorrow +%Y-%m-%dT00:30:00Z) $(GO) test -count=1 -tags gssh_test -run TestScripts ./cmd/gssh/

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags gssh_test ./cmd/gssh/

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on: $$out"; exit 1; fi

tidy-check:
	$(GO) mod tidy -diff

# Benchmarks: Go benchmarks (parser, placement, probe sources over sshd), the
# simulator's whole-trace replays (their figures and digests checked: too
# long for `make test`, which replays excerpts), the fan-out comparison with
# pdsh and an ssh loop, submit-to-running, and the long versions of the
# kill sweeps `make test` runs short (the controller-crash soak, the
# interrupt sweep of submit and schedule).
# Needs openssh-server, pdsh and hyperfine.
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 20x ./probe/ ./sched/
	$(GO) test -count=1 -tags longreplay -run 'Long$$' ./sim/
	$(GO) test -run '^$$' -bench Replay -benchtime 3x ./sim/
	bash bench/probe.sh
	bash bench/gpus.sh
	bash bench/submit.sh
	bash bench/serve-submit.sh
	bash bench/api-submit.sh
	bash bench/crash.sh
	GSSH_SWEEP_ROUNDS=20 $(GO) test -count=1 -run '^TestInterruptSweep$$' ./service/
	GSSH_INTERRUPT_STEPS=16 $(GO) test -count=1 -tags gssh_test -run '^TestInterruptedController$$' ./faults/

# Each fuzz target for FUZZ_TIME.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZ_TIME) $$pkg || exit 1; \
	  done; \
	done

# On a machine with an NVIDIA GPU: compare the helper with nvidia-smi (UUIDs,
# memory totals, processes) and time both. The test binary is built here
# (the GPU machine has no Go toolchain); bench/gpu-test.sh runs it there.
gpu-test: helper
	CGO_ENABLED=1 $(GO) test -c -tags gpu -o bin/nvmlsnap-gpu.test ./nvmlsnap/
	bash bench/gpu-test.sh

clean:
	rm -rf bin
