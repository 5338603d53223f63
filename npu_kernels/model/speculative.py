"""Greedy speculative decoding with a drafter, on any two `Runner`s (npu_kernels.model.runner): the loop, its
exactness check against plain greedy decoding, and the acceptance length as a performance figure.

One round, as mlir-air's DFlash loop runs it (programming_examples/llms/qwen3_4b_q4nx/dflash_loop.py, `run`, the
"ACCEPT" step of its module docstring, @b0244be): the drafter proposes `block` tokens after the last committed
one; the target verifies the block [committed, draft_1 .. draft_block] and gives its own greedy token at each of
those positions; draft j+1 survives while it equals the target's token at position j, up to the first mismatch;
the target's token after the accepted prefix is committed as the bonus. A round commits accepted + 1 tokens
(mlir-air's "acceptance length", tokens per verify dispatch). Neither KV cache is rolled back: the next round's
writes cover every rejected position before anything reads it, as in mlir-air's loop.

What differs from DFlash, and why it does not matter to the gate: DFlash's drafter is a block-diffusion model fed
the target's hidden taps; here the drafter is any smaller decoder with the target's vocabulary, drafting
autoregressively from its own KV cache. The emulated verify pass is the target's KV-cached decode step at each
block position in turn (the numerics of plain decoding), not a batched dispatch: on the emulator a difference
between the two streams is the loop's own (acceptance, caches), which is what the gate and its drills are about;
on NPU2 a batched verify dispatch has numerics of its own, which is why mlir-air's `--exactness` re-runs every
prompt with the drafter off (dflash_acceptance_device.py, @43e773e).

The loop's test faults (drills) are `npu_kernels.model.options.SPEC_FAULT_HELP`; they wrap `accepted_prefix`
(`npu_kernels.model.faults.speculation_acceptance`) and are never a branch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

DEFAULT_BLOCK = 4  # tokens drafted per round (DFlash's block 8 verifies 8 positions: 7 drafted + the committed one)
MAX_BLOCK = 16


@dataclass
class SpeculativeRun:
    """One prompt's speculative stream: the generated tokens and the tokens committed per verify pass."""

    tokens: list[int]
    acceptance: list[int] = field(default_factory=list)


def greedy_stream(runner, prompt_tokens, n_tokens: int) -> list[int]:
    """Plain greedy decoding: the prefill's token, then `n_tokens - 1` KV-cached decode steps."""
    prompt = np.asarray(prompt_tokens, np.int64).reshape(-1)
    out = [int(runner.prefill(prompt).top1_token)]
    for i in range(n_tokens - 1):
        out.append(int(runner.decode_step(out[-1], len(prompt) + i).top1_token))
    return out


def verify_block(target, block_tokens: list[int], start: int) -> list[int]:
    """The target's greedy token after each of `block_tokens`, placed at positions start, start+1, ...: one verify
    pass (on the emulator, its decode step at each position; the cache slots it writes past the accepted prefix are
    overwritten by the next round)."""
    return [int(target.decode_step(t, start + i).top1_token) for i, t in enumerate(block_tokens)]


def accepted_prefix(drafts: list[int], post: list[int]) -> int:
    """How many of `drafts` survive: draft j (0-based) stays while it equals the target's token `post[j]` at the
    position before it (greedy acceptance, dflash_loop.py `run` @b0244be)."""
    acc = 0
    while acc < len(drafts) and drafts[acc] == post[acc]:
        acc += 1
    return acc


Acceptance = Callable[[list[int], list[int]], int]  # (drafts, the target's tokens) -> how many drafts survive


def speculative_stream(target, drafter, prompt_tokens, n_tokens: int, block: int = DEFAULT_BLOCK,
                       accept: Acceptance = accepted_prefix) -> SpeculativeRun:
    """Greedy speculative decoding of `n_tokens` tokens after `prompt_tokens` (see the module docstring); `accept`
    is `accepted_prefix` except in a drill (npu_kernels.model.faults.speculation_acceptance)."""
    if not 1 <= block <= MAX_BLOCK:
        raise ValueError(f"draft block {block} is outside 1..{MAX_BLOCK}")
    prompt = np.asarray(prompt_tokens, np.int64).reshape(-1)
    P = len(prompt)
    gen = [int(target.prefill(prompt).top1_token)]  # the first token is the target's own prefill
    drafter.prefill(prompt)
    acceptance: list[int] = []
    drafter_next = P  # the first position the drafter's cache does not hold yet
    while len(gen) < n_tokens:
        pos = P + len(gen) - 1  # the last committed token's position
        cur = gen[-1]
        drafts, tok = [], cur
        for i in range(block):
            tok = int(drafter.decode_step(tok, pos + i).top1_token)
            drafts.append(tok)
        drafter_next = pos + block
        post = verify_block(target, [cur, *drafts], pos)
        acc = accept(drafts, post)
        bonus = post[acc] if acc < len(post) else post[-1]
        committed = [*drafts[:acc], bonus]
        acceptance.append(len(committed))
        gen.extend(committed)
        if acc == block:  # the drafter never read its last draft: its cache catches up before the next round
            drafter.decode_step(drafts[-1], drafter_next)
    return SpeculativeRun(tokens=gen[:n_tokens], acceptance=acceptance)


def teacher_forced_verify(target, prompt_tokens, plain: list[int], block: int = DEFAULT_BLOCK) -> int | None:
    """The verify pass teacher-forced on the plain greedy stream `plain`: blocks of block + 1 of its tokens, each
    verified where plain decoding put them; the first step whose verified token is not plain's next one (None:
    every step agrees). Run where the free streams differ: agreement here puts the fault in the acceptance or
    in the caches between rounds, not in the verify pass's numerics."""
    prompt = np.asarray(prompt_tokens, np.int64).reshape(-1)
    target.prefill(prompt)
    for start in range(0, len(plain) - 1, block + 1):
        chunk = plain[start : start + block + 1]
        post = verify_block(target, chunk, len(prompt) + start)
        for j, tok in enumerate(post):
            if start + j + 1 < len(plain) and tok != plain[start + j + 1]:
                return start + j + 1
    return None


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """The first index where two token streams differ (a length difference counts); None when equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def acceptance_summary(lengths: list[int]) -> tuple[float | None, float | None]:
    """(mean, standard error) of the tokens committed per verify pass, as mlir-air prints them
    (dflash_acceptance_device.py @43e773e: the sample standard deviation over sqrt(n); a floor, since the passes
    within one prompt are correlated). (None, None) without a pass; a standard error of None with one."""
    a = np.asarray(lengths, np.float64)
    if a.size == 0:
        return None, None
    mean = float(a.mean())
    sem = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else None
    return mean, sem
