# fedspread developer entry points. `make test` and `make demo` set up everything they need.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: test soak demo bench bench-quick lint typecheck unit integration sandbox-bin crds protos clean

# constraints.txt pins every dependency to the versions the tests ran with (python -m federation.pins)
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[agent,coordinator,dev]'
	touch $(STAMP)

## test: install into .venv, build (once) the sandbox control plane, run lint, types, import
## contracts and the whole test suite (unit + integration on real Kubernetes)
test: $(STAMP) lint typecheck sandbox-bin
	$(BIN)/pytest --durations=40

## soak: the fault tests (a coordinator, an agent, an apiserver, a Ray actor killed; streams cut;
## 409 storms) and the property tests, with many more seeds and examples (FEDSPREAD_SOAK=1);
## a failure names its seed: rerun it alone with pytest 'FILE::TEST[SEED]'; shrink a state-machine
## failure with `python -m tests.support.replay_machine FILE` (its printed steps). Not part of `make test`.
SOAK_TESTS = $(wildcard tests/integration/test_faults_*.py) tests/integration/test_ray_shards.py \
             tests/integration/test_restarts_mid_handover.py \
             $(wildcard tests/unit/test_invariants_*.py tests/unit/test_fuzz_*.py tests/unit/test_webhook_fuzz.py)
soak: $(STAMP) sandbox-bin
	FEDSPREAD_SOAK=1 $(BIN)/pytest $(SOAK_TESTS)

## demo: install, build the sandbox binaries the first time, run `fedspread demo` (a hub, dc1,
## aws-eu, gcp-eu, the coordinator and an agent each). Options: make demo ARGS="--keep"
demo: $(STAMP) sandbox-bin
	$(BIN)/fedspread demo $(ARGS)

## bench: every benchmark at full size (bench/README.md); writes bench/results/latest.json
bench: $(STAMP) sandbox-bin
	$(BIN)/python -m bench.run

## bench-quick: the same at small sizes (< 10 minutes on 2 cores)
bench-quick: $(STAMP) sandbox-bin
	$(BIN)/python -m bench.run --quick

## sandbox-bin: build and cache kube-apiserver/-controller-manager/-scheduler (~6 min, once), with
## kubectl and the pinned kustomize the tests render deploy/ with
sandbox-bin: $(STAMP)
	$(BIN)/fedspread sandbox build

lint: $(STAMP)
	$(BIN)/ruff check federation agents tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests/unit

integration: $(STAMP) sandbox-bin
	$(BIN)/pytest tests/integration

## crds: regenerate crds/ from the pydantic models
crds: $(STAMP)
	$(BIN)/fedspread crds --output-dir crds

## protos: regenerate the gRPC code under federation/rpc from its .proto files
protos: $(STAMP)
	$(BIN)/python -m federation.rpc.generate

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
