"""The emulated stand-in behind a scaffolded model directory (`ledger scaffold NAME --stand-in emulated`).

`verify_adapter.py` there implements mlir-air's adapter protocol (PE/llms/verify/verify_runner.py:265-338:
DEFAULT_MODEL, resolve_model, hf_reference, build_config, build_runner) with the functions here, so
mlir-air's own verify runner (or the twin's) judges npu-ledger's emulated pipeline. `<name>_inference.py`
there runs `main`: the `make run` / `make profile` lines of mlir-air's llama32_1b_inference.py (:672-756,
:801-934), with TTFT / tokens-per-second / per-ELF figures from the NPU2 performance model (modelled) and
tokens from the emulated pipeline; `--prefill-only --seq-len L` (`make profile-prefill CTX=L`) prints the two
lines mlir-air's llms/bench/sweep_prefill.py@a32bef3 reads, the TTFT modelled for a prefill built for L.

The optimisations and test faults in force come from env NPU_LEDGER_SWITCHES / NPU_LEDGER_FAULTS
(comma-separated; the model Makefile exports its make variables of the same names), so `ledger advance`
switches them itself in Phases 4-5 (`with_options`): switch `X` is the prefill path's, `decode:X` the
decode path's, as in `npu_kernels.backends.in_process`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.backends.in_process import InProcessBackend
from npu_kernels.perf.figures import NPU2_PREFILL_SEQ, build_seq, decode_ctx, npu2_figures, path_switches
from npu_kernels.perf.predict import predict
from npu_kernels.settings import env_get, env_default

ENV_SWITCHES = "NPU_LEDGER_SWITCHES"
ENV_FAULTS = "NPU_LEDGER_FAULTS"


def _names(var: str) -> list[str]:
    return [x.strip() for x in env_get(var, "").split(",") if x.strip()]


def switches_from_env() -> dict[str, bool]:
    return {k: True for k in _names(ENV_SWITCHES)}


def faults_from_env() -> frozenset[str]:
    return frozenset(_names(ENV_FAULTS))


def settings(model_dir: str | Path) -> dict:
    """What `ledger scaffold` recorded, with `model_path`: the model folder the stand-in runs, from the environment
    (NPU_LEDGER_MODEL, which the model Makefile exports and the tool passes) else the recorded `model` (a Hugging
    Face id or a relative path; a scaffold writes no absolute path) or, from older scaffolds, `model_path`."""
    recorded = json.loads((Path(model_dir) / "stand_in.json").read_text())
    path = env_get("NPU_LEDGER_MODEL") or recorded.get("model_path") or recorded.get("model", "")
    if not (Path(path).is_dir() or Path(path).is_file()):
        # the stand-in runs a local folder: an HF id or a folder name alone would send mlir-air's HF reference to the
        # network (a traceback) -- one line saying what to give instead
        raise SystemExit(f"the stand-in's model folder {path!r} is not here: NPU_LEDGER_MODEL is "
                         f"{'set to it' if env_get('NPU_LEDGER_MODEL') else 'not set'}; run "
                         "`make <target> NPU_LEDGER_MODEL=<the model folder>` (npu-ledger passes it on its own make calls)")
    return {**recorded, "model_path": path}


@dataclass(frozen=True)
class AdapterConfig:
    """What mlir-air's verify runner reads from `build_config()` (hf_runner.py:76-79, verify_runner.py:348)."""

    n_layers: int
    emb_dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int


def build_config(model_path: str) -> AdapterConfig:
    c = resolve(load_raw_config(model_path))
    return AdapterConfig(c.n_layers, c.emb_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size)


class StandInRunner:
    """mlir-air's Runner protocol (runners/base.py:27-53) over npu-ledger's emulated pipeline."""

    name = "npu_ledger_emulated"

    def __init__(self, model_path: str) -> None:
        cfg = resolve(load_raw_config(model_path))
        # the stand-in is the NPU: it never runs the HF reference, so it does not load it to share its weights
        self.backend = InProcessBackend(model_path, cfg, "emulated", "npu2", switches_from_env(), faults_from_env(),
                                        share_reference=False)
        self.pipeline = self.backend.pipeline
        self.options = self.pipeline.options

    def prefill(self, prompt_tokens):
        return self.pipeline.prefill(np.asarray(prompt_tokens, np.int64))

    def decode_step(self, input_token: int, current_pos: int):
        return self.pipeline.decode_step(int(input_token), int(current_pos))


def build_runner(model_path: str) -> StandInRunner:
    return StandInRunner(model_path)


# --- <name>_inference.py: make run / make profile -----------------------------------------------------


def _figures(model_path: str) -> dict:
    cfg = resolve(load_raw_config(model_path))
    # the modelled NPU2 figures only (no pipeline built), under the env's switches
    return npu2_figures(cfg, {k: True for k in switches_from_env()})


def _generate(runner: StandInRunner, tokens: list[int], n: int) -> list[int]:
    out = [runner.prefill(tokens).top1_token]
    for i in range(n - 1):
        out.append(runner.decode_step(out[-1], len(tokens) + i).top1_token)
    return out


# What the failures the twin's fault switch asks for print: the texts mlir-air's sweeps tell the causes apart by
# (llms/bench/sweep_prefill.py@57bbed0b BUILD_LIMIT_RES, XRT_FAIL_RE, HOST_OOM_RE; sweep_decode_runtime.py@c0dabd80
# XRT_FAIL_RE, OOM_RE). A fault whose text is none of these prints `error: TEXT` and fails (a `fail: ...` status).
FAULT_LINES = {
    "no_registry_shape": "KeyError: shape M={n} not in registry GEMM_bf16_in_bf16_out.json",
    "bd_exhaustion": "error: Too many simultaneously active buffer descriptors",
    "method_tile_mismatch": "AssertionError: registry tile_m=64 != method 'drain' tile_m=32",
    "stitcher_mixed_tile_m": "AssertionError: the stitcher assumes all 3 GEMMs share the same tile_m suffix",
    "device_fail": "RuntimeError: ERT_CMD_STATE_TIMEOUT: the dispatch did not complete",
    "xrt_incomplete": "RuntimeError: ERT_CMD_STATE_TIMEOUT: the dispatch did not complete",
    "host_oom": "terminate called after throwing an instance of 'std::bad_alloc'",
}


def fault_line(cause: str, n: int) -> str:
    """The line a failure of `cause` at length / context n prints (FAULT_LINES; another text as a compiler error)."""
    if cause in FAULT_LINES:
        return FAULT_LINES[cause].format(n=n)
    return cause if cause.startswith("error:") else f"error: {cause}"


def sweep_fault(model_dir: str, target: str, n: int) -> str | None:
    """The cause the twin's fault switch sets for `make TARGET` at length / context n: a line
    `profile-prefill@N: CAUSE` or `profile-decode@N: CAUSE` in the twin's twin-faults.txt or env
    NPU_LEDGER_TWIN_FAULTS (npu_kernels.mlir_air.twin.harness.faults); None when there is none."""
    from npu_kernels.mlir_air.twin.harness import ENV_ROOT, faults

    env_default(ENV_ROOT, str(Path(model_dir).resolve().parents[2]))  # <twin>/programming_examples/llms/<m>
    return faults().get(f"{target}@{n}")


def _prefill_only(model_path: str, seq_len: int, fault: str | None = None) -> int:
    """`make profile-prefill CTX=N` (`make bench`): the warm prefill TTFT at padded length N, in the lines
    sweep_prefill.py reads (57bbed0 sweep_prefill.py: its TTFT_RE and SEQ_RE guard); modelled, latency only.
    `fault` (the twin's fault switch): `wrong_seq_len` builds the engines at another length and still prints a
    TTFT (what the guard is for); another cause prints its line and exits 1."""
    built = seq_len if fault != "wrong_seq_len" else (NPU2_PREFILL_SEQ if seq_len != NPU2_PREFILL_SEQ else seq_len // 2)
    if fault and fault != "wrong_seq_len":
        print(f"Compiling prefill kernels (seq_len={seq_len}) (npu-ledger stand-in fault)")
        print(fault_line(fault, seq_len), flush=True)
        return 1
    cfg = resolve(load_raw_config(model_path))
    p = predict(cfg, seq=built, switches=path_switches({k: True for k in switches_from_env()}, "prefill"),
                ctx=decode_ctx(cfg))
    print(f"Compiling prefill kernels (seq_len={built}) (npu-ledger stand-in: nothing to compile)")
    print(f"LLAMA Prefill: prompt_len={built} (padded)")
    print(f"Time to first token (TTFT): {p.ttft_s:.6f}s (modelled NPU2, seq {built})")
    return 0


def _decode_contexts(model_path: str, model_dir: str, contexts: list[int]) -> int:
    """`make profile-decode CONTEXTS=c1,c2,...`: one process over every context, printing per context the line
    mlir-air's llms/bench/sweep_decode_runtime.py@c0dabd80 reads (POINT_RE: `[bench] decode ctx=C median M ms min
    m ms (T tok/s)`), the decode step's modelled NPU2 time over a KV cache of C positions (the modelled curve's
    figure, median = min: a model has no spread); latency only. The twin's fault switch at a context prints that
    cause's line there and ends the run (exit 1): the contexts before it keep their points, as upstream's do."""
    cfg = resolve(load_raw_config(model_path))
    sw = path_switches({k: True for k in switches_from_env()}, "decode")
    for ctx in contexts:
        fault = sweep_fault(model_dir, "profile-decode", ctx)
        if fault:
            print(fault_line(fault, ctx), flush=True)
            return 1
        p = predict(cfg, seq=build_seq(cfg), switches=sw, ctx=ctx)
        print(f"[bench] decode ctx={ctx} median {p.ms_per_token:.4f} ms min {p.ms_per_token:.4f} ms "
              f"({p.decode_tokens_per_s:.4f} tok/s) (modelled NPU2)", flush=True)
    return 0


class FastTokenizer:
    """A model folder's tokenizer.json read with the `tokenizers` library: `encode` (special tokens added) and
    `decode` (special tokens kept) as the folder's fast AutoTokenizer gives them, where that is exactly the
    library's own output: transformers 5 adds nothing to a fast tokenizer's decode unless the folder asks for
    `clean_up_tokenization_spaces` on a non-BPE model (tokenization_utils_tokenizers.py `_decode`), and then
    `stand_in_tokenizer` takes AutoTokenizer instead. transformers' import alone is ~3 s of each `make profile`
    and `make verify`, which run once per Phase 4-5 switch. tests/unit/test_twin_stand_in.py checks both agree
    with AutoTokenizer."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer  # the Rust library only: no torch, no transformers

        self._tok = Tokenizer.from_file(str(path))

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text).ids)

    def decode(self, ids) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)


def _library_output_is_autotokenizers(folder: Path) -> bool:
    try:
        spec = json.loads((folder / "tokenizer.json").read_text())
        extra = json.loads((folder / "tokenizer_config.json").read_text()) \
            if (folder / "tokenizer_config.json").is_file() else {}
    except (OSError, ValueError):
        return False
    if not extra.get("clean_up_tokenization_spaces"):
        return True
    bpe = (spec.get("model") or {}).get("type") == "BPE"
    return bpe and not extra.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output")


def stand_in_tokenizer(model_path: str | Path):
    """The tokenizer the stand-in's scripts encode prompts and decode tokens with: `FastTokenizer` where its output
    is the AutoTokenizer's (above), else AutoTokenizer."""
    folder = Path(model_path)
    if (folder / "tokenizer.json").is_file() and _library_output_is_autotokenizers(folder):
        return FastTokenizer(folder / "tokenizer.json")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def encode_prompt(model_path: str, text: str) -> list[int]:
    """The prompt's token ids as the model's AutoTokenizer gives them (`encode`, special tokens added)."""
    return list(stand_in_tokenizer(model_path).encode(text))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="inference")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--run-only", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--interactive", action="store_true", help="make chat: one reply per line read from stdin")
    p.add_argument("--prefill-only", action="store_true", help="make profile-prefill / bench: TTFT at --seq-len")
    p.add_argument("--seq-len", type=int, default=NPU2_PREFILL_SEQ)
    p.add_argument("--decode-contexts", default="", help="make profile-decode: decode step time per context")
    p.add_argument("--n-tokens", type=int, default=100)
    p.add_argument("--prompt", default="What is the capital of France?")
    p.add_argument("--model", default="local")
    a = p.parse_args(argv)
    if a.compile_only:  # needs no model
        print("Compilation passed. (npu-ledger stand-in: nothing to compile)")
        return 0
    model_path = settings(a.model_dir)["model_path"]
    if a.prefill_only:
        return _prefill_only(model_path, a.seq_len, sweep_fault(a.model_dir, "profile-prefill", a.seq_len))
    if a.decode_contexts:
        return _decode_contexts(model_path, a.model_dir, [int(c) for c in a.decode_contexts.split(",") if c.strip()])
    runner = StandInRunner(model_path)
    n = max(1, a.n_tokens)
    if a.interactive:  # llama32_1b's `make chat` REPL: prepare once, then one reply per prompt
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_path)
        print("Chat (npu-ledger stand-in: emulated tokens). One prompt per line; end with EOF.", flush=True)
        for line in sys.stdin:
            if line.strip():
                print(tok.decode(_generate(runner, list(tok.encode(line.strip())), n)), flush=True)
        return 0
    tokens = encode_prompt(model_path, a.prompt)
    f = _figures(model_path)
    out = _generate(runner, tokens, n)
    first = out[0]
    # llama32_1b_inference.py:672-756, figures modelled (NPU2 performance model)
    print(f"LLAMA Inference: prompt_len={len(tokens)}, n_tokens={n}")
    print(f"Time to first token (TTFT): {f['ttft_s']:.4f}s (modelled NPU2, seq {f['seq']}). First token: {first}")
    print(f"Decoding {n - 1} tokens (token 1 to {n - 1})...")
    total = f["ms_per_token"] * (n - 1) / 1e3
    print(f"Generated {n - 1} tokens in {total:.4f}s")
    print(f"Tokens/second: {f['tokens_per_s']:.2f}")
    print(f"Time/token: {f['ms_per_token']:.4f}ms")
    print(f"Tokens: {out}")
    if a.profile:  # the dataflow summary (llama32_1b_inference.py:801-934), one row per ELF
        print("END-TO-END DATAFLOW (per make profile, dataflow order)")
        print("--- PREFILL (per query, seq_len padded) ---")
        for elf, row in f["per_elf"]["prefill"].items():
            print(f"  {elf:<38}{'NPU':<6}{row.get('total_ms', 0.0):>8.4f} ms  x{row.get('calls', 1)}")
        print(f"  {'End-to-end (prefill, per query)':<38}{'':<6}{f['prefill_s'] * 1e3:>8.4f} ms  prompt_len={f['seq']}")
        print(f"--- DECODE (avg per token, {n - 1} tokens) ---")
        for elf, row in f["per_elf"]["decode"].items():
            print(f"  {elf:<38}{'NPU':<6}{row.get('total_ms', 0.0):>8.4f} ms  x{row.get('calls', 1)}")
        print(f"  {'End-to-end (per token)':<38}{'':<6}{f['ms_per_token']:>8.4f} ms  ctx={f['ctx']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
