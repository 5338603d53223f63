"""The kernel catalog: NUMERICS tolerances, harness-style inputs, FP32 references against hand math."""

import math

import numpy as np
import pytest

from npu_kernels.numerics.bf16 import is_bf16, to_bf16
from npu_kernels.numerics.catalog import CATALOG, KERNELS, get_spec
from npu_kernels.numerics.references import rope_lut
from npu_kernels.numerics.spec import ShapeError, UnknownKernel
from npu_kernels.numerics.executors.base import KERNEL_NAMES

# (rtol, atol) of docs/numerics.md's leaf-kernel table
NUMERICS_TOLERANCES = {
    ("gemm", "f32-out"): (1.6e-2, 1.5e-3),
    ("gemm", "bf16-out-high"): (1.6e-2, 1.5e-3),
    ("gemm", "bf16-out-low"): (1.6e-2, 4e-3),
    ("gemv", "bf16-out"): (1.6e-2, 1e-3),
    ("rmsnorm", "bf16-out"): (1.6e-2, 5e-2),
    ("layernorm", "bf16-out"): (1.6e-2, 6e-2),
    ("flash_attention", "bf16-out"): (1.6e-2, 1e-1),
    ("eltwise_add", "bf16-out"): (1.6e-2, 5e-2),
    ("silu_mul", "bf16-out"): (1.6e-2, 8e-2),
    ("rope", "bf16-out"): (1.6e-2, 5e-2),
    ("gelu", "bf16-out"): (1.6e-2, 5e-2),
}
NUMERICS_NPU2 = {
    "gemm": 9.3e-3, "rmsnorm": 4.2e-3, "layernorm": 4.4e-3, "eltwise_add": 1.9e-3, "silu_mul": 1.0e-2,
    "rope": 2.8e-3, "gelu": 8.4e-3,
}


def test_the_catalog_covers_every_executor_kernel():
    assert set(KERNELS) == set(KERNEL_NAMES)


@pytest.mark.parametrize("kernel,contract", sorted(NUMERICS_TOLERANCES))
def test_contract_tolerances_are_the_numerics_table(kernel, contract):
    c = get_spec(kernel).contract(contract)
    assert (c.rtol, c.atol) == NUMERICS_TOLERANCES[(kernel, contract)]


def test_default_contracts_and_npu2_figures():
    assert get_spec("gemm").default_contract == "bf16-out-high"
    assert get_spec("gemm").contract(None).out_dtype == "bf16"
    assert get_spec("gemm").contract("f32-out").out_dtype == "f32"
    for kernel, figure in NUMERICS_NPU2.items():
        spec = get_spec(kernel)
        assert spec.npu2_figure(spec.contracts and next(iter(spec.contracts))).mean_rel_L1 == figure
    fa = get_spec("flash_attention").npu2_figure()
    assert (fa.low, fa.high) == (3.8e-2, 5.5e-2)
    low = get_spec("gemm").npu2_figure("bf16-out-low")
    assert (low.low, low.high) == (1.3e-2, 1.9e-2)


def test_unknown_kernels_and_contracts_are_named():
    with pytest.raises(UnknownKernel, match="known kernels: gemm"):
        get_spec("matmul")
    with pytest.raises(ValueError, match="bf16-out-low"):
        get_spec("gemm").contract("bf8")


@pytest.mark.parametrize(
    "kernel,shape,message",
    [
        ("gemm", {"M": 8, "K": 8}, "missing N"),
        ("gemm", {"M": 8, "K": 8, "N": 8, "X": 1}, "unknown X"),
        ("gemm", {"M": 0, "K": 8, "N": 8}, "must be positive"),
        ("gemm", {"M": 2.5, "K": 8, "N": 8}, "not an integer"),
        ("flash_attention", {"lq": 8, "lk": 8, "dk": 8, "dv": 8, "heads_q": 3, "heads_kv": 2, "causal": True},
         "not a multiple"),
        ("flash_attention", {"lq": 8, "lk": 8, "dk": 8, "dv": 8, "heads_q": 2, "heads_kv": 2, "causal": "maybe"},
         "not a boolean"),
        ("rope", {"rows": 4, "head_dim": 7}, "even"),
    ],
)
def test_bad_shapes_are_refused_with_a_reason(kernel, shape, message):
    with pytest.raises(ShapeError, match=message):
        get_spec(kernel).normalize_shape(shape)


def test_shapes_accept_numeric_strings_and_boolean_words():
    s = get_spec("flash_attention").normalize_shape(
        {"lq": "64", "lk": 64, "dk": 64, "dv": 64, "heads_q": 2, "heads_kv": 1, "causal": "true"}
    )
    assert s["lq"] == 64 and s["causal"] is True


@pytest.mark.parametrize("kernel", KERNELS)
def test_inputs_are_bf16_deterministic_and_seeded(kernel):
    spec = get_spec(kernel)
    a = spec.make_inputs(spec.small_shape, seed=0)
    b = spec.make_inputs(spec.small_shape, seed=0)
    c = spec.make_inputs(spec.small_shape, seed=1)
    for name in a:
        assert a[name].dtype == np.float32 and is_bf16(a[name])
        assert np.array_equal(a[name], b[name])
    varying = [n for n in a if n not in ("cos", "sin")]
    assert any(not np.array_equal(a[n], c[n]) for n in varying)


def test_matmul_inputs_are_scaled_by_one_over_sqrt_k():
    i = get_spec("gemm").make_inputs({"M": 256, "K": 1024, "N": 256})
    assert i["a"].std() == pytest.approx(1 / 32, rel=0.05)
    assert i["b"].std() == pytest.approx(1 / 32, rel=0.05)
    j = get_spec("silu_mul").make_inputs({"N": 100000})
    assert j["g"].std() == pytest.approx(1.0, rel=0.02)


def test_gemm_reference_is_fp32_matmul_cast_per_contract():
    spec = get_spec("gemm")
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    b = np.array([[1.0, 0.00390625], [1.0, 1.0]], np.float32)
    inputs, shape = {"a": a, "b": b}, {"M": 2, "K": 2, "N": 2}
    f32 = spec.reference(inputs, shape, "f32-out")
    assert np.array_equal(f32, np.array([[3.0, 2.00390625], [7.0, 4.01171875]], np.float32))
    bf = spec.reference(inputs, shape, "bf16-out-high")
    assert np.array_equal(bf, to_bf16(f32)) and bf[0, 1] == 2.0  # 2.00390625 is not a bf16 value


def test_rmsnorm_and_layernorm_references_by_hand():
    x = np.array([[3.0, 4.0]], np.float32)
    w = np.array([1.0, 2.0], np.float32)
    rms = get_spec("rmsnorm").reference({"x": x, "w": w}, {"M": 1, "N": 2})
    scale = 1 / math.sqrt(12.5 + 1e-5)
    assert rms == pytest.approx(to_bf16(np.array([[3 * scale, 8 * scale]], np.float32)))
    b = np.array([0.5, -0.5], np.float32)
    ln = get_spec("layernorm").reference({"x": x, "w": w, "b": b}, {"M": 1, "N": 2})
    r = 1 / math.sqrt(0.25 + 1e-5)
    assert ln == pytest.approx(to_bf16(np.array([[-0.5 * r + 0.5, 2 * 0.5 * r - 0.5]], np.float32)))


def test_rope_reference_rotates_each_half_pair():
    x = np.array([[1.0, 2.0, 10.0, 20.0]], np.float32)  # pairs (1, 10) and (2, 20)
    cos = np.array([[0.0, 1.0]], np.float32)
    sin = np.array([[1.0, 0.0]], np.float32)  # rotate the first pair by 90 degrees, keep the second
    out = get_spec("rope").reference({"x": x, "cos": cos, "sin": sin}, {"rows": 1, "head_dim": 4})
    assert np.array_equal(out, np.array([[-10.0, 2.0, 1.0, 20.0]], np.float32))


def test_rope_lut_is_the_harness_table_in_bf16():
    cos, sin = rope_lut(3, 4, theta=10000.0)
    assert cos.shape == (3, 2) and is_bf16(cos) and is_bf16(sin)
    assert cos[0].tolist() == [1.0, 1.0] and sin[0].tolist() == [0.0, 0.0]
    assert sin[1, 0] == to_bf16(np.float32(math.sin(1.0)))
    assert cos[2, 1] == to_bf16(np.float32(math.cos(2 / 100.0)))


def test_attention_reference_with_one_visible_key_returns_that_value():
    spec = get_spec("flash_attention")
    shape = {"lq": 3, "lk": 3, "dk": 2, "dv": 2, "heads_q": 2, "heads_kv": 1, "causal": True}
    q = np.ones((2, 3, 2), np.float32)
    k = np.zeros((1, 3, 2), np.float32)
    v = np.array([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]], np.float32)
    out = spec.reference({"q": q, "k": k, "v": v}, shape)
    assert np.array_equal(out[:, 0], [[1.0, 2.0], [1.0, 2.0]])  # row 0 sees key 0 only
    assert np.array_equal(out[:, 1], [[2.0, 3.0], [2.0, 3.0]])  # equal scores: the mean of keys 0..1
    nc = spec.reference({"q": q, "k": k, "v": v}, {**shape, "causal": False})
    assert np.array_equal(nc[:, 0], [[3.0, 4.0], [3.0, 4.0]])


def test_elementwise_references_by_hand():
    add = get_spec("eltwise_add").reference({"a": np.array([1.0, 2.0], np.float32),
                                             "b": np.array([0.00390625, -2.0], np.float32)}, {"N": 2})
    assert add.tolist() == [1.0, 0.0]  # 1 + 2^-8 rounds to even (1.0) in bf16
    g = np.array([0.0, 20.0, -20.0], np.float32)
    u = np.array([5.0, 2.0, 3.0], np.float32)
    silu = get_spec("silu_mul").reference({"g": g, "u": u}, {"N": 3})
    assert silu == pytest.approx([0.0, 40.0, 0.0], abs=1e-6)
    x = np.array([0.0, 1.0, -10.0], np.float32)
    gelu = get_spec("gelu").reference({"x": x}, {"N": 3})
    expected = 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715)))
    assert gelu == pytest.approx(to_bf16(np.array([0.0, expected, 0.0], np.float32)), abs=1e-6)


def test_flops_and_bytes():
    assert get_spec("gemm").flops({"M": 2, "K": 3, "N": 4}) == 48
    assert get_spec("gemm").bytes({"M": 2, "K": 3, "N": 4}) == 2 * (6 + 12 + 8)
    fa = {"lq": 4, "lk": 4, "dk": 2, "dv": 2, "heads_q": 1, "heads_kv": 1, "causal": False}
    assert get_spec("flash_attention").flops(fa) == 2 * 16 * 4
    assert get_spec("flash_attention").flops({**fa, "causal": True}) == 2 * 16 * 4 / 2
    assert get_spec("eltwise_add").bytes({"N": 10}) == 60


@pytest.mark.parametrize("kernel", KERNELS)
def test_registry_and_small_shapes_are_valid(kernel):
    spec = CATALOG[kernel]
    spec.normalize_shape(spec.registry_shape)
    spec.normalize_shape(spec.small_shape)
    assert spec.target_tiles["npu2"] >= spec.target_tiles["npu1"] > 0
