"""The thresholds live in one module (`npu_kernels.thresholds`) that the gates, their predicates, the evaluator and
the triage rules all import."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import handlers.evaluator.audit as audit
import statemachine.predicates as predicates
from npu_kernels import thresholds
from npu_kernels.numerics.kernels import get as kernel_definition
from npu_kernels.numerics.kernels import kernel_tolerance
from npu_kernels.numerics.catalog import KERNELS, get_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("head_dim", [32, 64, 96, 128, 160, 192, 255, 256, 512])
def test_the_gate_and_the_evaluator_hold_a_block_to_the_same_per_position_floor(head_dim):
    assert predicates.per_position_threshold is thresholds.per_position_threshold
    assert audit.per_position_threshold is thresholds.per_position_threshold
    assert thresholds.per_position_threshold(head_dim) == (0.99 if head_dim <= 64 else 0.98 if head_dim < 256 else 0.97)


def test_no_cosine_floor_is_spelled_outside_the_thresholds_module():
    literal = re.compile(r"(?<![\d.])0\.9[789]\d*(?!\d)")
    found = []
    for folder in ("handlers", "statemachine"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".toml"):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if literal.search(line.split("#")[0]):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_every_kernel_contract_takes_its_tolerance_from_the_one_table():
    """Every kernel's contracts carry its module's tolerances (the registry's table, the union of the modules'), and
    npu_kernels.thresholds declares none of its own for a registered kernel."""
    for name in KERNELS:
        d = kernel_definition(name)
        assert d is not None, name
        for contract in get_spec(name).contracts.values():
            assert (contract.rtol, contract.atol) == kernel_tolerance(name, contract.name) == d.tolerances[contract.name]
            assert (name, contract.name) not in thresholds.KERNEL_TOLERANCES


def test_a_triage_rule_can_name_a_threshold_instead_of_restating_it():
    from handlers.triage.predicates import predicate_params

    assert predicate_params({"fn": "ge", "key": "block_cosine", "value": "BLOCK_COSINE_MIN"})["value"] == 0.99
