"""Recorded walks of npu-ledger's HF reference (npu_kernels.model.reference_walks): a walk read from the store is the
walk the reference gives, bit for bit; the store is keyed by everything the walk is a function of; a torn entry
is recomputed; a replay refuses inputs it did not record."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from npu_kernels.model.hf_reference import HfRunner
from npu_kernels.model.reference_walks import Replay, ReplayMismatch, record, reference_identity, reference_walks, walk_key

PROMPTS = [[1, 17, 42, 99, 7], [1, 5, 300, 12]]
STEPS = 6


@pytest.fixture(scope="module")
def tiny_reference(tiny_llama):
    return HfRunner(tiny_llama)


def _built(runner, calls):
    def build():
        calls.append(1)
        return runner
    return build


def test_a_stored_walk_is_the_references_walk_bit_for_bit_and_the_reference_is_not_built_again(tiny_llama,
                                                                                                 tiny_reference, tmp_path):
    direct = [record(tiny_reference, p, STEPS, None) for p in PROMPTS]
    calls: list[int] = []
    first = reference_walks(tiny_llama, PROMPTS, STEPS, _built(tiny_reference, calls), cache_dir=tmp_path)
    assert calls == [1] and len(list(tmp_path.glob("*.npz"))) == len(PROMPTS)
    again = reference_walks(tiny_llama, PROMPTS, STEPS, _built(tiny_reference, calls), cache_dir=tmp_path)
    assert calls == [1]  # every walk came from the store
    for d, a, b in zip(direct, first, again):
        assert d.fed == a.fed == b.fed and len(d.fed) == STEPS - 1
        for x, y, z in zip(d.logits, a.logits, b.logits):
            assert x.dtype == y.dtype == z.dtype == np.float32
            assert x.tobytes() == y.tobytes() == z.tobytes()


def test_without_a_store_every_walk_is_computed(tiny_llama, tiny_reference, tmp_path, monkeypatch):
    monkeypatch.delenv("NPU_LEDGER_REFERENCE_CACHE", raising=False)
    calls: list[int] = []
    reference_walks(tiny_llama, PROMPTS[:1], STEPS, _built(tiny_reference, calls))
    reference_walks(tiny_llama, PROMPTS[:1], STEPS, _built(tiny_reference, calls))
    assert calls == [1, 1]


def test_the_key_moves_with_the_weights_the_prompt_and_the_step_count(tiny_llama, tmp_path):
    identity = reference_identity(tiny_llama)
    key = walk_key(identity, PROMPTS[0], STEPS)
    assert walk_key(identity, PROMPTS[0], STEPS + 1) != key and walk_key(identity, PROMPTS[1], STEPS) != key
    copy = shutil.copytree(tiny_llama, tmp_path / "copy")
    assert walk_key(reference_identity(copy), PROMPTS[0], STEPS) == key  # content, not place
    weights = next(copy.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert walk_key(reference_identity(copy), PROMPTS[0], STEPS) != key
    assert {"torch", "transformers", "machine", "cpu_flags", "folder_sha256"} <= set(identity)


def test_a_torn_entry_is_recomputed_and_rewritten(tiny_llama, tiny_reference, tmp_path):
    calls: list[int] = []
    [good] = reference_walks(tiny_llama, PROMPTS[:1], STEPS, _built(tiny_reference, calls), cache_dir=tmp_path)
    [entry] = tmp_path.glob("*.npz")
    entry.write_bytes(entry.read_bytes()[:100])
    [again] = reference_walks(tiny_llama, PROMPTS[:1], STEPS, _built(tiny_reference, calls), cache_dir=tmp_path)
    assert calls == [1, 1] and again.fed == good.fed
    assert all(x.tobytes() == y.tobytes() for x, y in zip(good.logits, again.logits))


def test_a_replay_refuses_another_prompt_token_or_position(tiny_reference):
    rec = record(tiny_reference, PROMPTS[0], 3, None)
    replay = Replay("reference", rec)
    with pytest.raises(ReplayMismatch):
        replay.prefill(PROMPTS[1])
    replay.prefill(PROMPTS[0])
    with pytest.raises(ReplayMismatch):
        replay.decode_step(rec.fed[0] + 1, len(PROMPTS[0]))
    replay.prefill(PROMPTS[0])
    with pytest.raises(ReplayMismatch):
        replay.decode_step(rec.fed[0], len(PROMPTS[0]) + 1)


def test_a_stored_prefill_holds_every_layer_output_bit_for_bit(tiny_llama, tiny_reference, tmp_path):
    from npu_kernels.model.reference_walks import reference_prefill

    direct = tiny_reference.prefill(np.asarray(PROMPTS[0], np.int64))
    calls: list[int] = []
    first = reference_prefill(tiny_llama, PROMPTS[0], _built(tiny_reference, calls), cache_dir=tmp_path)
    again = reference_prefill(tiny_llama, PROMPTS[0], _built(tiny_reference, calls), cache_dir=tmp_path)
    assert calls == [1]
    for rec in (first, again):
        assert len(rec.layer_intermediates) == len(direct.layer_intermediates)
        for x, y in zip(rec.layer_intermediates, direct.layer_intermediates):
            assert np.asarray(x["ffn_out"]).tobytes() == np.asarray(y["ffn_out"]).tobytes()
        assert np.asarray(rec.final_hidden_normed).tobytes() == np.asarray(direct.final_hidden_normed).tobytes()
        assert rec.logits_at_pred.tobytes() == direct.logits_at_pred.tobytes() and rec.top1_token == direct.top1_token
