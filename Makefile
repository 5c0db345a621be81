# Two commands: `make demo` (the main job on embedded defaults) and `make test`.
# Each sets itself up (scripts/setup.sh): venv, CPU torch, system packages as root.
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup demo test bench image ui clean experiment

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

bench: setup
	@$(PY) -m benchmarks.run

ui: setup
	@DAGSTER_HOME=$${DAGSTER_HOME:-$(CURDIR)/.touchstone/dagster_home} $(VENV)/bin/dagster dev -w workspace.yaml

clean:
	rm -rf .touchstone build *.egg-info
