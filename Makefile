# Two commands: `make demo` (the main job on embedded defaults) and `make test`.
# Each sets itself up (scripts/setup.sh): venv, CPU torch, system packages as root.
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup demo test bench image ui clean experiment smollm2

setup:
	@bash scripts/setup.sh

image: setup
	@$(VENV)/bin/touchstone sandbox build-image

demo: setup
	@bash scripts/demo.sh

test: setup
	@bash scripts/test.sh

# The filter ablation (docs/EXPERIMENTS.md): naive harness vs verifier + auditor as the data filter.
experiment: setup
	@$(VENV)/bin/touchstone experiment filter-ablation $(EXPERIMENT_ARGS)

# Expert iteration with a real base (SmolLM2-135M-Instruct, LoRA on CPU): three rounds on the
# model's own verified runs (docs/ROUNDS.md, "Expert iteration"). Its own data root and instance;
# a torch thread per core, up to 8 (on a quiet 2-core machine two threads decode 1.7x faster than
# one); on a machine busy with other jobs set OMP_NUM_THREADS=1 (there two decoded 10x slower:
# docs/BENCHMARKS.md). `make smollm2 SEED=1000`: another seed of the study, in its own data root
# (.touchstone-smollm2-seed1000). `make smollm2 ROUNDS=4`: a fourth round on a finished study (ROUNDS
# counts the data root's finished rounds) and that round's control arm.
SEED ?= 0
ROUNDS ?= 3
SMOLLM2_THREADS := $(shell n=$$(nproc); echo $$(( n < 8 ? n : 8 )))
SMOLLM2_HOME := $(CURDIR)/.touchstone-smollm2$(if $(filter-out 0,$(SEED)),-seed$(SEED))
smollm2: setup
	@$(VENV)/bin/touchstone model fetch smollm2-135m-instruct
	@OMP_NUM_THREADS=$${OMP_NUM_THREADS:-$(SMOLLM2_THREADS)} TOUCHSTONE_HOME=$${TOUCHSTONE_HOME:-$(SMOLLM2_HOME)} DAGSTER_HOME=$${DAGSTER_HOME:-$${TOUCHSTONE_HOME:-$(SMOLLM2_HOME)}/dagster_home} \
		bash -c 'mkdir -p "$$DAGSTER_HOME" && start=$$(date +%s) && $(VENV)/bin/touchstone round run --rounds $(ROUNDS) --total --control --seed $(SEED) -c orchestration/deploy/local-smollm2.yaml; rc=$$?; echo "smollm2: $(ROUNDS) rounds and the control arm in $$(( $$(date +%s) - start )) s (exit $$rc)"; exit $$rc'

bench: setup
	@$(PY) -m benchmarks.run

ui: setup
	@DAGSTER_HOME=$${DAGSTER_HOME:-$(CURDIR)/.touchstone/dagster_home} $(VENV)/bin/dagster dev -w workspace.yaml

clean:
	rm -rf .touchstone build *.egg-info
