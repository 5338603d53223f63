"""`ledger init`'s memory estimate and refusal (npu_kernels.model.host_memory, issue 48 item 3)."""

from __future__ import annotations

import json
from pathlib import Path

from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.host_memory import (
    GIB,
    available_memory_bytes,
    machine_memory_bytes,
    memory_line,
    memory_need,
    memory_problem,
    parameter_count,
)
from tests.e2e.cli import in_process

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def test_the_estimate_is_the_stated_sum_of_weights_working_set_and_runtime():
    c = resolve(load_raw_config(CONFIGS / "llama-3.2-1b.json"))
    P = parameter_count(c)
    assert 1.23e9 < P < 1.24e9  # Llama-3.2-1B: 1.236 G parameters, its head tied to the embedding
    need = memory_need(c)
    S = 2048
    working = (2 * 16 * S * 8 * 64 * 6) + S * S * 32 * 4 + S * (4 * 2048 + 3 * 8192) * 4  # no S x V logits
    assert (need.weights_bytes, need.working_bytes, need.runtime_bytes) == (4 * P, working, GIB // 2)
    assert memory_need(c, "mlir-air").weights_bytes == 4 * P  # the reference and the NPU2's BOs, both bf16
    assert memory_need(c, "torch").weights_bytes == 6 * P
    # a checkpoint that is not BF16: the in-process pipeline holds its own bf16 copy beside the reference's
    assert memory_need(c, "emulated", shared=False).weights_bytes == 6 * P
    assert memory_need(c, "mlir-air", shared=False).weights_bytes == 4 * P
    assert memory_line(need, 24 * GIB, 13 * GIB) == (
        f"memory: about {need.total_bytes / GIB:.1f} GiB needed of this machine's 24.0 GiB (MemTotal, /proc/meminfo, "
        f"13.0 GiB available now): 4 B x 1.24 G parameters {4 * P / GIB:.1f} GiB + working set at 2048 positions "
        f"{working / GIB:.1f} GiB + runtime 0.5 GiB")
    assert "available" not in memory_line(need, 24 * GIB)


def test_a_model_the_machine_cannot_hold_is_named_with_the_bound():
    need = memory_need(resolve(load_raw_config(CONFIGS / "mistral-7b-v0.3.json")))
    assert memory_problem(need, need.total_bytes) is None and memory_problem(need, None) is None
    problem = memory_problem(need, 16 * GIB)
    assert problem.startswith(f"needs about {need.total_bytes / GIB:.1f} GiB, more than this machine's 16.0 GiB "
                              "(MemTotal, /proc/meminfo): 4 B x 7.25 G parameters")


def test_memtotal_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683792 kB\nMemFree:         1000 kB\nMemAvailable:   12000000 kB\n")
    assert machine_memory_bytes(meminfo) == 24683792 * 1024
    assert available_memory_bytes(meminfo) == 12000000 * 1024
    assert machine_memory_bytes(tmp_path / "missing") is None and available_memory_bytes(tmp_path / "missing") is None
    real = machine_memory_bytes()
    assert real is None or real > 0


def test_init_refuses_a_model_no_machine_holds_in_one_line_and_records_nothing(tmp_path):
    # every size at 4x the largest published value (npu_kernels/model/size_bounds.py): ~0.6 T parameters, ~5 TiB
    raw = json.loads((CONFIGS / "llama-3.2-1b.json").read_text()) | {
        "num_hidden_layers": 144, "hidden_size": 16384, "intermediate_size": 57344, "num_attention_heads": 128,
        "num_key_value_heads": 32, "head_dim": 128}
    cfg = tmp_path / "huge" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(raw))
    proc = in_process(tmp_path / "ws", "init", str(cfg), "--name", "huge")
    assert proc.returncode == 1 and proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: huge: needs about ") and "(MemTotal, /proc/meminfo)" in proc.stderr
    assert proc.stderr.rstrip().endswith("nothing was recorded")
    assert json.loads(in_process(tmp_path / "ws", "log", "--json").stdout) == []
