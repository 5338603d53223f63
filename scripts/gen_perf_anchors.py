"""Regenerate npu_kernels/perf/anchors.toml from a read-only mlir-air mirror (development time only).

    python scripts/gen_perf_anchors.py "$MLIR_AIR_DIR" > npu_kernels/perf/anchors.toml

Copies numbers and their citations (path, line) only - no mlir-air code or prose. Each row: kernel, shape,
tile/herd as the registry states it, the measured latency in microseconds, and `src` = "path:line".
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

DETAILS = "programming_examples/kernel_registry/details"


def show(repo: str, path: str) -> list[str]:
    return subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], check=True, capture_output=True,
                          text=True).stdout.splitlines()


def cells(line: str) -> list[str]:
    return [c.strip().strip("*") for c in line.strip().strip("|").split("|")]


def us(text: str) -> float:
    text = text.replace("*", "").strip()
    m = re.match(r"([\d.]+)(?:[–-]([\d.]+))?\s*(µs|ms)", text)
    if not m:
        raise ValueError(text)
    lo = float(m.group(1))
    hi = float(m.group(2)) if m.group(2) else lo
    v = (lo + hi) / 2
    return v * 1000 if m.group(3) == "ms" else v


def gemm_rows(repo: str) -> list[dict]:
    out = []
    for dtype in ("bf16", "fp32"):
        path = f"{DETAILS}/GEMM_bf16_in_{dtype}_out.json"
        lines = show(repo, path)
        data = json.loads("\n".join(lines))
        hits = [i + 1 for i, l in enumerate(lines) if '"gflops"' in l]
        k = 0
        for s in data["shapes"]:
            for method, r in s["methods"].items():
                if "gflops" not in r:
                    continue
                line = hits[k]
                k += 1
                if r["gflops"] is None:
                    continue
                herd = r.get("herd") or data["herd"]
                lat = 2 * s["M"] * s["K"] * s["N"] / (r["gflops"] * 1e9) * 1e6
                out.append({"kernel": "gemm", "shape": {"M": s["M"], "K": s["K"], "N": s["N"]},
                            "tile": dict(r["tile"], herd_m=herd[0], herd_n=herd[1], method=method,
                                         out=dtype),
                            "latency_us": round(lat, 2), "gflops": r["gflops"], "src": f"{path}:{line}"})
    return out


def md_rows(repo: str) -> list[dict]:
    out = []

    def table(name, start, stop, fn):
        path = f"{DETAILS}/{name}"
        lines = show(repo, path)
        for i in range(start - 1, stop):
            line = lines[i]
            if not line.startswith("|") or "---" in line:
                continue
            row = fn(cells(line))
            if row:
                row["src"] = f"{path}:{i + 1}"
                out.append(row)

    def gemv(c):
        M, K = (int(x) for x in c[0].split("×"))
        hm, tm, mi = (int(x) for x in c[1].split("/"))
        return {"kernel": "gemv", "shape": {"M": M, "K": K}, "tile": {"herd_m": hm, "tile_m": tm, "m_input": mi},
                "latency_us": us(c[2])}
    table("GEMV_bf16.md", 92, 128, gemv)
    # the m_input sweep point the registry states in its tile-choice notes (2048x2048, herd_m 8, tile_m 8,
    # m_input 1, in GFLOP/s): the only GEMV row where m_input < tile_m at a K the table also has at m_input 8
    path = f"{DETAILS}/GEMV_bf16.md"
    for i, line in enumerate(show(repo, path)):
        m = re.search(r"\((\d+)×(\d+), `tile_m=(\d+)`: `m_input=(\d+)` → ([\d.]+),", line)
        if m:
            M, K, tm, mi, gf = int(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[5])
            out.append({"kernel": "gemv", "shape": {"M": M, "K": K}, "tile": {"herd_m": 8, "tile_m": tm, "m_input": mi},
                        "latency_us": round(2 * M * K / (gf * 1e9) * 1e6, 2), "gflops": gf, "src": f"{path}:{i + 1}"})

    def norm(kernel):
        def f(c):
            M, N = (int(x) for x in c[0].split("×"))
            return {"kernel": kernel, "shape": {"M": M, "N": N}, "tile": {"herd_x": int(c[1])}, "latency_us": us(c[2])}
        return f
    table("RMSNorm_bf16.md", 102, 109, norm("rmsnorm"))
    table("RMSNorm_bf16.md", 132, 134, lambda c: {"kernel": "rmsnorm", "shape": {"M": 2048, "N": 2048},
                                                  "tile": {"herd_x": int(c[0])}, "latency_us": us(c[1])})
    table("LayerNorm_bf16.md", 122, 122, norm("layernorm"))
    table("LayerNorm_bf16.md", 137, 139, lambda c: {"kernel": "layernorm", "shape": {"M": 1024, "N": 768},
                                                    "tile": {"herd_x": int(c[0])}, "latency_us": us(c[1])})

    def rope(c):
        hx, hy = (int(x) for x in c[2].split("/"))
        return {"kernel": "rope", "shape": {"rows": int(c[0]), "head_dim": int(c[1])},
                "tile": {"herd_x": hx, "herd_y": hy}, "latency_us": us(c[3])}
    table("RoPE_bf16.md", 175, 187, rope)
    table("RoPE_bf16.md", 233, 235, lambda c: {"kernel": "rope", "shape": {"rows": 65536, "head_dim": 64},
                                               "tile": {"herd_x": int(c[0]), "herd_y": 1}, "latency_us": us(c[2])})

    def fa(c):
        lq, lk = (int(x) for x in c[0].split("×"))
        dk, dv = (int(x) for x in c[1].split("/"))
        hq, hkv = (int(x) for x in c[2].split("/"))
        return {"kernel": "flash_attention",
                "shape": {"lq": lq, "lk": lk, "dk": dk, "dv": dv, "heads_q": hq, "heads_kv": hkv,
                          "causal": c[3] == "✓"}, "tile": {}, "latency_us": us(c[5])}
    table("FlashAttention_bf16.md", 149, 164, fa)

    def elt(kernel, key):
        def f(c):
            hx, hy, t = (int(x) for x in c[2].replace("*", "").split("/"))
            return {"kernel": kernel, "shape": {"N": int(c[0])}, "tile": {"herd_x": hx, "herd_y": hy, key: t},
                    "latency_us": us(c[3])}
        return f
    table("EltwiseAdd_bf16.md", 100, 108, elt("eltwise_add", "tile"))
    table("EltwiseAdd_bf16.md", 140, 142, lambda c: {"kernel": "eltwise_add", "shape": {"N": 4194304},
                                                     "tile": {"herd_x": int(c[0]), "herd_y": 1, "tile": 2048},
                                                     "latency_us": us(c[1])})
    table("SiLU_Mul_bf16.md", 101, 111, elt("silu_mul", "tile_n"))
    table("SiLU_Mul_bf16.md", 141, 141, lambda c: {"kernel": "silu_mul", "shape": {"N": 16777216},
                                                   "tile": {"herd_x": 1, "herd_y": 1, "tile_n": 4096},
                                                   "latency_us": us(c[2])})
    table("GELU_bf16.md", 160, 164, elt("gelu", "tile_n"))
    table("GELU_bf16.md", 192, 192, lambda c: {"kernel": "gelu", "shape": {"N": 3145728},
                                               "tile": {"herd_x": 8, "herd_y": 1, "tile_n": 4096},
                                               "latency_us": us(c[2])})
    table("GELU_bf16.md", 203, 205, lambda c: {"kernel": "gelu", "shape": {"N": 3145728},
                                               "tile": {"herd_x": int(c[0]), "herd_y": 1, "tile_n": 4096},
                                               "latency_us": us(c[2])})
    return out


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    return repr(v)


def main(repo: str) -> None:
    print("# NPU2 kernel-level measurements the performance model calibrates on (mlir-air kernel registry,")
    print("# measured June 2026). Numbers with their citations only: src = path:line in Xilinx/mlir-air.")
    print("# GEMM latency_us = 2*M*K*N / (gflops*1e9); a latency range in the source is stored as its midpoint.")
    print("# Regenerate: python scripts/gen_perf_anchors.py <mlir-air checkout> > npu_kernels/perf/anchors.toml")
    for r in gemm_rows(repo) + md_rows(repo):
        print("\n[[row]]")
        for k in ("kernel", "shape", "tile", "latency_us", "gflops", "src"):
            if k in r:
                print(f"{k} = {toml_value(r[k])}")


if __name__ == "__main__":
    main(sys.argv[1])
