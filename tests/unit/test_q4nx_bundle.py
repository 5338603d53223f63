"""A model as a Q4NX bundle (npu_kernels.model.q4nx_bundle): `ledger quantize`'s writer read back exactly, init's
one-line refusals, the dequantised reference folder and the host dequantisation agreeing bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from handlers import deploy
from handlers.uow import DeploymentError
from npu_kernels.model.architecture import load_raw_config, resolve
from npu_kernels.model.faults import bundle_dequantiser
from npu_kernels.model.q4nx import dequantise, pack, quantise, read_bundle, unpack, write_container
from npu_kernels.numerics.bf16 import widened
from npu_kernels.model.q4nx_bundle import (
    bundle_problem,
    dequantised_tensors,
    hf_tensors,
    host_dequantised_weights,
    reference_sha256,
    write_bundle,
    write_reference_folder,
)
from ledger import open_ledger


@pytest.fixture(scope="module")
def tiny_bundle(tiny_llama, tmp_path_factory):
    out = tmp_path_factory.mktemp("q4nx") / "model.q4nx"
    config = resolve(load_raw_config(tiny_llama))
    return out, config, write_bundle(tiny_llama, out, config, "llama")


def test_the_bundle_holds_every_projection_4_bit_and_the_rest_bf16(tiny_llama, tiny_bundle):
    path, config, written = tiny_bundle
    b = read_bundle(path)
    assert b.layout() == "llama" and b.metadata["scale_dtype"] == "bfloat16" and written["padded"] == []
    original = hf_tensors(tiny_llama, config)
    back = dequantised_tensors(b, config)
    assert set(back) == set(original)
    for name, w in original.items():
        if name.endswith("_proj.weight"):
            assert b.header[name]["dtype"] == "I16"
            # reader(writer(W)) exact: the stored fields are the quantiser's, bit for bit
            assert np.array_equal(back[name], dequantise(*quantise(w, "llama"), "llama")[:w.shape[0], :w.shape[1]])
            assert not np.array_equal(back[name], w)
        else:
            assert np.array_equal(back[name], w)  # norms, embeddings, the untied head: bf16 as they were


def test_the_pipeline_dequantises_what_the_reference_folder_holds(tiny_llama, tiny_bundle, tmp_path):
    path, config, _ = tiny_bundle
    info = write_reference_folder(path, tiny_llama, tmp_path / "ref", config)
    assert info["dequantised_sha256"] == reference_sha256(path, config)
    assert {"config.json", "tokenizer.json", "model.q4nx", "model.safetensors"} <= {p.name for p in (tmp_path / "ref").iterdir()}
    ref = read_bundle(tmp_path / "ref" / "model.safetensors")  # a plain bf16 safetensors file
    host = host_dequantised_weights(tmp_path / "ref", config)
    wq = np.frombuffer(ref.raw("model.layers.1.self_attn.q_proj.weight"), "<u2").astype(np.uint32) << 16
    # the pipeline holds a projection as bf16 bits (npu_kernels.model.weights): widened, the file's values
    assert np.array_equal(widened(host.layers[1].wq), wq.view(np.float32).reshape(host.layers[1].wq.shape[::-1]).T)
    shifted = host_dequantised_weights(tmp_path / "ref", config, bundle_dequantiser(frozenset({"q4nx_group_scale_shift"})))
    assert not np.array_equal(shifted.layers[1].wq, host.layers[1].wq)
    assert np.array_equal(shifted.layers[1].attn_norm, host.layers[1].attn_norm)


def test_a_bundle_the_config_disagrees_with_is_named_in_one_line(tiny_llama, tiny_bundle, tmp_path):
    path, config, _ = tiny_bundle
    assert bundle_problem(path, config) is None
    raw = load_raw_config(tiny_llama)
    other = resolve({**raw, "intermediate_size": raw["intermediate_size"] * 2})
    problem = bundle_problem(path, other)
    assert problem and "\n" not in problem and "gate_proj" in problem and "needs" in problem


def test_right_codes_with_a_wrong_scale_dtype_are_refused_at_init_in_one_line(tiny_llama, tiny_bundle, tmp_path):
    path, config, _ = tiny_bundle
    b = read_bundle(path)
    tensors = {}
    for name in b.names:
        h = b.header[name]
        data = bytes(b.raw(name))
        if h["dtype"] == "I16":  # the same codes, scales and mins re-packed with float16 scale/min words
            codes, scales, mins = unpack(data, *h["shape"])
            data = pack(codes, scales, mins, "float16")
        tensors[name] = (h["dtype"], h["shape"], data)
    write_container(tmp_path / "f16.q4nx", tensors, {**b.metadata, "scale_dtype": "float16"})
    problem = bundle_problem(tmp_path / "f16.q4nx", config)
    assert problem and "float16" in problem and "\n" not in problem
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    with pytest.raises(DeploymentError, match="float16") as e:
        deploy.init(ledger, str(tmp_path / "f16.q4nx"), base=str(tiny_llama), dtype="q4nx", name="f16",
                    workspace=tmp_path)
    assert "\n" not in str(e.value) and not ledger.streams("deployment:") and not (tmp_path / ".ledger").exists()
    assert deploy.init(ledger, str(path), base=str(tiny_llama), dtype="q4nx", name="ok", workspace=tmp_path) == "ok"
