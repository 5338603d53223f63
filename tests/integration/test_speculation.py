"""Phase 5's speculative-decoding gate (issue 46 item 3) in process, on the tiny Llama and its one-layer drafter
(tests.models.build_tiny_drafter): the drills (a drafted token committed without the target's check, an accepted
prefix one token too long) each fail the gate with a reason naming the prompt and step; `ledger init --drafter`
refuses what cannot be a drafter in one line, recording nothing. The faithful drafter reaching `deployed` is the
tiny e2e deployment's own (tests/prebuilt.py `tiny_snapshots`, asserted in tests/e2e/test_deploy_tiny.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from handlers import deploy
from handlers.gates import GateRun
from handlers.gates.speculation import speculation_event, speculation_reasons
from handlers.uow import DeploymentError
from ledger import open_ledger
from ledger.streams import deployment_stream
from npu_kernels.model.faults import speculation_acceptance
from npu_kernels.model.options import SPEC_FAULTS
from npu_kernels.model.speculative import acceptance_summary, accepted_prefix
from statemachine.checks import speculation_problem
from statemachine.fold import fold

pytestmark = pytest.mark.usefixtures("single_torch_thread")


def _state(tmp_path, tiny_llama, drafter, **kw):
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    name = deploy.init(ledger, str(tiny_llama), name="t", workspace=tmp_path, drafter=str(drafter), **kw)
    return ledger, fold(ledger.read_stream(deployment_stream(name)))


def test_the_accepted_prefix_is_the_drafts_agreeing_with_the_target_and_each_fault_breaks_it():
    drafts, post = [5, 6, 7, 8], [5, 6, 9, 8, 1]  # the target agrees with drafts 0 and 1, rejects draft 2
    assert accepted_prefix(drafts, post) == 2 == speculation_acceptance(frozenset())(drafts, post)
    assert speculation_acceptance(frozenset({"spec_accept_off_by_one"}))(drafts, post) == 3
    assert speculation_acceptance(frozenset({"spec_unverified_accept"}))(drafts, post) == 4
    all_agree = [5, 6, 7, 8, 1]
    assert accepted_prefix(drafts, all_agree) == 4 == speculation_acceptance(frozenset({"spec_accept_off_by_one"}))(
        drafts, all_agree)
    assert acceptance_summary([1, 2, 3]) == (2.0, pytest.approx(1 / 3**0.5))
    assert acceptance_summary([2]) == (2.0, None) and acceptance_summary([]) == (None, None)


@pytest.mark.parametrize("fault", sorted(SPEC_FAULTS))
def test_a_speculation_drill_fails_the_gate_naming_the_prompt_and_step(fault, tmp_path, tiny_llama, tiny_llama_drafter):
    _, state = _state(tmp_path, tiny_llama, tiny_llama_drafter, draft_block=2, drafter_faults=(fault,))
    event = speculation_event(GateRun(state=state, workspace=tmp_path), [])
    assert not isinstance(event, str), event
    assert not event.passed and event.faults == [fault] and event.exact_prompts < len(event.prompts)
    why = speculation_problem(event)
    assert why and "differ from those without it at step" in why, why
    reasons = speculation_reasons(event)
    assert reasons and all(fault in r and "differ from those without it" in r for r in reasons), reasons
    # teacher-forced on the plain stream the verify pass agrees: the fault is in what the loop accepts
    assert all(r["teacher_forced_divergence"] is None for r in event.prompts if r["first_divergence"] is not None)
    assert all("the verify pass agrees at every step" in r for r in reasons)
    # the acceptance length is recorded whatever the verdict, and is the figure of the recorded lengths
    lengths = [n for r in event.prompts for n in r["acceptance"]]
    assert event.n_verify_passes == len(lengths) and event.acceptance_mean == pytest.approx(sum(lengths) / len(lengths))
    assert event.provenance_class == "cpu-emulator"
    forged = event.model_copy(update={"passed": True, "exact_prompts": len(event.prompts)})
    assert "differ" in speculation_problem(forged)  # a forged pass is re-derived from the streams


def _refused(tmp_path, tiny_llama, drafter, match: str, **kw) -> None:
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    with pytest.raises(DeploymentError, match=match) as e:
        deploy.init(ledger, str(tiny_llama), name="t", workspace=tmp_path, drafter=str(drafter), **kw)
    assert "\n" not in str(e.value) and "nothing was recorded" in str(e.value)
    assert not ledger.read_stream(deployment_stream("t"))


def test_init_refuses_a_drafter_with_another_vocabulary_in_one_line(tmp_path, tiny_llama, tiny_llama_drafter):
    other = tmp_path / "other-vocab"
    shutil.copytree(tiny_llama_drafter, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "vocab_size": config["vocab_size"] + 1}))
    _refused(tmp_path, tiny_llama, other, "vocabulary size")
    (other / "config.json").write_text(json.dumps(config))
    tok = json.loads((other / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = sorted(vocab)[10:12]
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two ids swapped: the same size, another tokenizer
    (other / "tokenizer.json").write_text(json.dumps(tok))
    _refused(tmp_path, tiny_llama, other, "maps 4 .token, id. pairs differently")


def test_init_refuses_a_drafter_no_smaller_than_the_model_and_a_bad_block(tmp_path, tiny_llama):
    _refused(tmp_path, tiny_llama, tiny_llama, "not smaller than the model")
    _refused(tmp_path, tiny_llama, tiny_llama, "outside 1..16", draft_block=0)
    _refused(tmp_path, tiny_llama, tmp_path / "nowhere", "not a model folder")
