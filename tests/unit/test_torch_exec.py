"""The torch executor: the GPU / vLLM bf16 standard for every leaf kernel."""

import numpy as np
import pytest
import torch

from npu_kernels.numerics.bf16 import is_bf16, to_bf16
from npu_kernels.numerics.catalog import KERNELS, get_spec
from npu_kernels.numerics.executors import make_executor
from npu_kernels.numerics.executors.torch_exec import TorchExecutor
from npu_kernels.numerics.run import run_kernel

EX = TorchExecutor("npu2", device="cpu")


@pytest.mark.parametrize("kernel,contract", [(k, c) for k in KERNELS for c in get_spec(k).contracts])
def test_every_kernel_passes_at_a_small_shape(kernel, contract):
    r = run_kernel(kernel, get_spec(kernel).small_shape, executor=EX, contract=contract)
    assert r.verdict == "PASS" and r.executor == "torch", (r.mismatches, r.max_abs)


def test_outputs_are_float32_numpy_holding_bf16_values():
    i = get_spec("gemm").make_inputs({"M": 32, "K": 64, "N": 32})
    out = EX.gemm(i["a"], i["b"])
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and is_bf16(out)
    f32 = EX.gemm(i["a"], i["b"], contract="f32-out")
    assert not is_bf16(f32)
    assert np.allclose(f32, i["a"].astype(np.float64) @ i["b"].astype(np.float64), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="contract"):
        EX.gemm(i["a"], i["b"], contract="int8")


def test_the_gpu_standard_beats_the_npu_datapath_on_every_kernel():
    emulated = make_executor("emulated")
    for kernel in ("gemm", "rmsnorm", "rope", "flash_attention", "silu_mul", "gelu"):
        spec = get_spec(kernel)
        t = run_kernel(kernel, spec.small_shape, executor=EX)
        e = run_kernel(kernel, spec.small_shape, executor=emulated)
        assert t.mean_rel_L1 < e.mean_rel_L1, kernel


def test_static_weights_are_converted_once_without_changing_numbers():
    ex = TorchExecutor(device="cpu")
    i = get_spec("gemm").make_inputs({"M": 16, "K": 64, "N": 32})
    plain = ex.gemm(i["a"], i["b"])
    cached = ex.gemm(i["a"], i["b"], static_key="w")
    assert np.array_equal(plain, cached) and np.array_equal(cached, ex.gemm(i["a"], i["b"], static_key="w"))
    assert len(ex._weights) == 1
    with pytest.raises(ValueError, match="static_key"):
        ex.gemm(i["a"], i["b"][:, :16], static_key="w")
    ex.clear_cache()
    assert not ex._weights


def test_rope_follows_hf_rotate_half_in_bf16():
    x = np.array([[1.0, 2.0, 10.0, 20.0]], np.float32)
    cos = np.array([[0.0, 1.0]], np.float32)
    sin = np.array([[1.0, 0.0]], np.float32)
    assert EX.rope(x, cos, sin).tolist() == [[-10.0, 2.0, 1.0, 20.0]]


def test_decode_attention_with_an_offset_matches_the_prefill_row():
    spec = get_spec("flash_attention")
    shape = {"lq": 96, "lk": 96, "dk": 64, "dv": 64, "heads_q": 4, "heads_kv": 2, "causal": True}
    i = spec.make_inputs(shape)
    full = EX.flash_attention(i["q"], i["k"], i["v"], causal=True)
    pos = 70
    one = EX.flash_attention(i["q"][:, pos : pos + 1], i["k"][:, : pos + 1], i["v"][:, : pos + 1], causal=True,
                             q_offset=pos)
    assert np.allclose(one[:, 0], full[:, pos], atol=2e-2)
    masked = EX.flash_attention(i["q"][:, pos : pos + 1], i["k"], i["v"], causal=True, q_offset=pos)
    assert np.allclose(masked, one, atol=2e-2)


def test_device_defaults_to_cuda_only_when_present():
    assert TorchExecutor().device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert make_executor("torch", "npu1").target == "npu1"
    assert EX.describe()["device"] == "cpu"


@pytest.mark.parametrize("shape", [(40, 576, 1536), (40, 1536, 576), (1, 576, 1536), (7, 576, 49152 // 8 + 32),
                                   (13, 512, 96)])
@pytest.mark.parametrize("contract", ["bf16-out-high", "f32-out"])
def test_gemm_panels_copied_contiguous_give_the_products_of_the_strided_panels_bit_for_bit(shape, contract):
    """The GEMM hands each 64-column panel of B to torch as a contiguous copy (gemm.py `torch`, for speed): the
    products are those of the strided column views the matmul was given before, at SmolLM2's and the tiny models'
    shapes, the last panel narrower where N is not a multiple of 64."""
    from npu_kernels.numerics.kernels.gemm import GEMM_PANEL_N

    M, K, N = shape
    rng = np.random.default_rng(M * K + N)
    a = to_bf16(rng.standard_normal((M, K), np.float32))
    b = to_bf16(rng.standard_normal((K, N), np.float32) / np.sqrt(K))
    at, bt = EX._t(a), EX._t(b)
    if contract == "f32-out":
        at, bt = at.float(), bt.float()
    with torch.inference_mode():
        strided = torch.cat([at @ bt[:, j : j + GEMM_PANEL_N] for j in range(0, N, GEMM_PANEL_N)], 1)
    assert np.array_equal(EX.gemm(a, b, contract=contract), EX._np(strided))


@pytest.mark.parametrize("nan", [False, True])
def test_held_bits_become_the_bf16_tensor_the_float32_cast_gives_bit_for_bit_and_never_share_the_weights(nan):
    """`_t` takes a weight held as bf16 bits (uint16) straight to a bf16 tensor (torch_exec.py): the same bits as
    widening to float32 and casting, for infinities, -0, subnormals, a transposed view and a column slice; with a
    NaN among them, torch's cast decides its bits, as before."""
    from npu_kernels.numerics.bf16 import widened

    rng = np.random.default_rng(7)
    w = to_bf16(rng.standard_normal((96, 64), np.float32))
    w[0, :4] = [np.inf, -np.inf, -0.0, np.float32(2.0 ** -130)]
    if nan:
        w[3, 5] = np.nan
    bits = (w.view(np.uint32) >> 16).astype(np.uint16)
    for held in (bits, bits.T, bits[:, :32]):
        before = held.copy()
        ours = EX._t(held)
        cast = torch.from_numpy(np.ascontiguousarray(widened(held))).to(torch.bfloat16)
        assert ours.is_contiguous() and torch.equal(ours.view(torch.int16), cast.view(torch.int16))
        ours.view(torch.int16).fill_(0)  # a copy: the held weight is untouched
        assert np.array_equal(held, before)
