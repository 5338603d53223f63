"""Inputs that cannot run or read what they should not (issue 35 item 4), through the CLI and the MCP server.

Transcripts, logs, histories and registry files that are FIFOs or devices are refused in one line before they
are opened; an MCP tool reads no file outside the workspace (or an --allow-dir folder) and never echoes a line
of one; a config too large for any model in scope is refused at init; a model folder path with a make function
in it reaches the recipe as text; a deployment named `--help` is audited; lessons are printed escaped; printed
commands quote names. Most run in this process (tests/e2e/cli.py `in_process`); a FIFO that a regressed
reader would block on is unblocked by a writer after a while, so a regression fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from handlers.mcp.server import LedgerServer
from npu_kernels.mlir_air.executor import MlirAirExecutor
from registry.model_docs import model_dir_name
from tests.e2e.cli import in_process, ledger
from tests.e2e.workspaces import clone_stream, workspace_ledger
from tests.models import tiny_config, train_tokenizer

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"
CONFIG = CONFIGS / "smollm2-135m-instruct.json"
SECRET = "root:$6$SECRETSALT$SECRETHASH:19000:0:99999:7:::"


def _workspace(tmp_path: Path, name: str = "m") -> Path:
    ws = tmp_path / "ws"
    proc = in_process(ws, "init", str(CONFIG), f"--name={name}")
    assert proc.returncode == 0, proc.stderr
    return ws


def _fifo(path: Path) -> Path:
    """A FIFO no one writes to; after 20 s a writer opens and closes it, so a reader that blocked gets EOF."""
    os.mkfifo(path)

    def unblock() -> None:
        time.sleep(20)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # ENXIO when no reader waits: nothing to unblock
        except OSError:
            pass

    threading.Thread(target=unblock, daemon=True).start()
    return path


def _one_line(proc, *needles: str) -> None:
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and all(n in lines[0] for n in needles), proc.stderr


def test_a_fifo_as_a_transcript_a_log_a_history_or_a_registry_file_is_refused_in_one_line_recording_nothing(
        tmp_path):
    ws = _workspace(tmp_path)
    head = workspace_ledger(ws).head()
    fifo = _fifo(tmp_path / "transcript.fifo")
    registry = tmp_path / "kernel_registry"
    (registry / "details").mkdir(parents=True)
    _fifo(registry / "details" / "gemm_bf16.json")
    for args in (["record", "harness", "m", "--kernel", "gemm", "--shape", "M=64,K=64,N=64", "--file", str(fifo)],
                 ["triage", str(fifo)], ["perf", "import-history", str(fifo)], ["registry", "import", str(registry)]):
        started = time.monotonic()
        proc = in_process(ws, *args)
        _one_line(proc, "is a FIFO, not a regular file")
        assert time.monotonic() - started < 15, args  # refused before opening, not after a writer came
    assert workspace_ledger(ws).head() == head


def test_dev_zero_as_a_transcript_or_a_history_is_refused_at_once_without_reading_it(tmp_path):
    """A fresh interpreter under a 4 GiB address-space limit: a reader without a bound would fail on memory."""
    ws = _workspace(tmp_path)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("LEDGER_DB", None)
    for args in (["record", "harness", "m", "--kernel", "gemm", "--shape", "M=64,K=64,N=64", "--file", "/dev/zero"],
                 ["perf", "import-history", "/dev/zero"]):
        proc = subprocess.run([sys.executable, "-m", "handlers.cli", "--workspace", str(ws), *args],
                              capture_output=True, text=True, timeout=120, env=env, preexec_fn=limited)
        _one_line(proc, "/dev/zero is a character device, not a regular file")


def test_the_mcp_record_harness_tool_reads_no_file_outside_the_workspace_and_echoes_no_line_of_one(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir(), outside.mkdir()
    shadow = outside / "shadow"
    shadow.write_text(f"daemon:*:19000:0:99999:7:::\n{SECRET}\n")
    (ws / "copied.txt").write_text(shadow.read_text())
    server = LedgerServer(ws, f"sqlite:///{ws / '.ledger' / 'ledger.db'}", allowed=(CONFIGS,))
    assert not server.call("init", {"model": str(CONFIG), "name": "m"}).is_error
    row = {"name": "m", "kernel": "gemm", "shape": "M=64,K=64,N=64"}
    refused = server.call("record_harness", {**row, "transcript_path": str(shadow)}).content[0].text
    assert "outside the folders this server may read" in refused and "SECRET" not in refused
    inside = server.call("record_harness", {**row, "transcript_path": str(ws / "copied.txt")}).content[0].text
    assert inside.startswith("error: copied.txt: ") and "<line withheld>" in inside and "SECRET" not in inside
    for tool, args in (("init", {"model": str(outside), "name": "x"}), ("plan", {"target": str(shadow)}),
                       ("predict", {"target": str(shadow)})):
        text = server.call(tool, args).content[0].text
        assert "outside the folders this server may read" in text and "SECRET" not in text, tool
    opened = LedgerServer(ws, f"sqlite:///{ws / '.ledger' / 'ledger.db'}", allowed=(outside,))
    allowed = opened.call("record_harness", {**row, "transcript_path": str(shadow)}).content[0].text
    assert "outside" not in allowed and "SECRET" not in allowed  # read, refused as a transcript, not echoed


@pytest.mark.parametrize("change, said", [
    (lambda c: c.update(num_hidden_layers=100_000), "num_hidden_layers = 100000 is over the bound 144"),
    (lambda c: c.update(vocab_size=50_000_000), "vocab_size = 50000000 is over the bound 1048832"),
    (lambda c: c.update(padding=" " * (2 << 20)), "over the 1.0 MiB a config may be"),
])
def test_init_refuses_a_config_no_model_in_scope_can_have_in_one_line_recording_nothing(tmp_path, change, said):
    config = json.loads(CONFIG.read_text())
    change(config)
    path = tmp_path / "model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    proc = in_process(tmp_path / "ws", "init", str(path))
    _one_line(proc, said)
    assert workspace_ledger(tmp_path / "ws").head().size == 0


def test_a_model_folder_path_with_a_make_function_in_it_reaches_the_recipe_as_text_and_runs_nothing(tmp_path):
    """The mlir-air executor's model command with a Makefile that exports the variable, as the scaffold's does."""
    model_dir = tmp_path / "llms" / "m"
    model_dir.mkdir(parents=True)
    (model_dir / "Makefile").write_text("NPU_LEDGER_MODEL ?=\nexport NPU_LEDGER_MODEL\n"
                                        "run:\n\t@printenv NPU_LEDGER_MODEL\n")
    pwned = tmp_path / "pwned"
    hostile = f"{tmp_path}/models/$(shell touch {pwned})"
    executor = MlirAirExecutor(lock_path=str(tmp_path / "npu.lock"), timeout_s=60)
    command, rc, transcript, _ = executor.run_model_target("run", model_dir, make_vars={"NPU_LEDGER_MODEL": hostile})
    assert rc == 0 and not pwned.exists(), command
    assert hostile in transcript.splitlines()  # the value as given, $ and all


def test_a_deployment_named_dash_dash_help_is_audited_by_the_fresh_evaluator(tiny_at):
    ws = tiny_at(7)
    clone_stream(ws, "tiny", "--help")
    proc = ledger(ws, "audit", "--json", "--", "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["name"] == "--help"


def test_history_and_log_print_an_osc_escape_in_a_lesson_escaped(tmp_path):
    ws = _workspace(tmp_path)
    assert in_process(ws, "lesson", "m", "tiles \x1b]0;pwned\x07 and \x1b[2J cleared").returncode == 0
    for args in (["history", "m"], ["log"]):
        out = in_process(ws, *args).stdout
        assert "\x1b" not in out and "\x07" not in out, args
    assert "lesson: tiles \\x1b]0;pwned\\x07 and \\x1b[2J cleared" in in_process(ws, "history", "m").stdout


def test_printed_next_commands_quote_the_name_and_a_dash_name_follows_a_double_dash(tmp_path):
    spaced = in_process(tmp_path / "a", "init", str(CONFIG), "--name=my model")
    assert spaced.stdout.strip().endswith("next: ledger advance 'my model'"), spaced.stdout
    dashed = in_process(tmp_path / "b", "init", str(CONFIG), "--name=--help")
    assert dashed.stdout.strip().endswith("next: ledger advance -- --help"), dashed.stdout


def test_the_evaluation_report_s_bash_block_quotes_the_name(tiny_at):
    ws = tiny_at(7)
    clone_stream(ws, "tiny", "my model")
    assert in_process(ws, "registry", "build").returncode == 0
    report = (ws / "llms" / model_dir_name("my model") / "docs" / "evaluation_report.md").read_text()
    assert "ledger audit 'my model'\n" in report and "ledger log --stream 'deployment:my model'\n" in report


def test_triage_prints_the_log_lines_it_matched_with_their_escapes_shown_not_run(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("attn_npu2 flash_attn\n\x1b]0;pwned\x07 ERT_CMD_STATE_TIMEOUT\n")
    proc = in_process(tmp_path / "ws", "triage", str(log))
    assert proc.returncode == 0 and "ERT_CMD_STATE_TIMEOUT" in proc.stdout, proc.stdout
    assert "\x1b" not in proc.stdout and "\\x1b]0;pwned\\x07 ERT_CMD_STATE_TIMEOUT" in proc.stdout


def test_an_mcp_tool_refuses_a_folder_whose_config_or_weights_link_outside_the_workspace(tmp_path):
    """Issue #45 item 7: `confined` resolved the folder, not what is in it; a model folder inside the workspace
    whose config.json or safetensors is a symbolic link out is refused now, naming the link, quoting nothing."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir(), outside.mkdir()
    (outside / "config.json").write_text(CONFIG.read_text())
    (outside / "model.safetensors").write_text(SECRET)
    linked_config, linked_weights, linked_inside = ws / "m1", ws / "m2", ws / "m3"
    for folder in (linked_config, linked_weights, linked_inside, ws / "real"):
        folder.mkdir()
    (linked_config / "config.json").symlink_to(outside / "config.json")
    (linked_weights / "config.json").write_text(CONFIG.read_text())
    (linked_weights / "model.safetensors").symlink_to(outside / "model.safetensors")
    (ws / "real" / "config.json").write_text(CONFIG.read_text())
    (linked_inside / "config.json").symlink_to(ws / "real" / "config.json")  # inside: allowed
    server = LedgerServer(ws, f"sqlite:///{ws / '.ledger' / 'ledger.db'}")
    for folder, link in ((linked_config, "config.json"), (linked_weights, "model.safetensors")):
        text = server.call("init", {"model": str(folder), "name": folder.name}).content[0].text
        assert text.startswith(f"error: model {folder}: {link} is a symbolic link to outside the folders this server "
                               "may read") and "--allow-dir" in text and "SECRET" not in text, text
        assert "\n" not in text
    for tool, args in (("plan", {"target": str(linked_config)}), ("predict", {"target": str(linked_config)}),
                       ("registry_import", {"directory": str(linked_config)})):
        text = server.call(tool, args).content[0].text
        assert "config.json is a symbolic link to outside" in text, (tool, text)
    assert server.call("status", {}).structured_content["items"] == []  # nothing recorded
    assert not server.call("init", {"model": str(linked_inside), "name": "inside"}).is_error
    opened = LedgerServer(ws, f"sqlite:///{ws / '.ledger' / 'ledger.db'}", allowed=(outside,))
    assert not opened.call("init", {"model": str(linked_config), "name": "allowed"}).is_error


def test_the_mcp_lesson_and_triage_texts_are_bounded_as_the_cli_bounds_them(tmp_path):
    """Issue #45 item 7: a lesson (or a resume note) is at most what one command-line argument can carry (128 KiB),
    a log to triage at most the 16 MiB `ledger triage FILE` reads; over it, one line and nothing recorded."""
    ws = _workspace(tmp_path)
    server = LedgerServer(ws, f"sqlite:///{ws / '.ledger' / 'ledger.db'}")
    head = workspace_ledger(ws).head()
    text = server.call("lesson", {"name": "m", "text": "x" * (128 * 1024 + 1)}).content[0].text
    assert text == "error: the lesson text is 131073 bytes, over the 131072 bytes a lesson may be; refused"
    assert workspace_ledger(ws).head() == head
    assert not server.call("lesson", {"name": "m", "text": "é" * (64 * 1024)}).is_error  # 128 KiB of UTF-8
    text = server.call("triage", {"text": "error: " * (3 << 20)}).content[0].text
    assert text == "error: the log text is 21.0 MiB, over the 16.0 MiB a log may be; refused"
    proc = in_process(ws, "lesson", "m", "y" * (128 * 1024 + 1))  # the CLI's own path: the same bound
    assert proc.returncode == 1 and proc.stderr.strip().endswith("over the 131072 bytes a lesson may be; refused")


# --- issue 45 item 5: the values a family's adapter reads, checked at init -----------------------------------


def _family_config(kind: str) -> dict:
    """The config.json transformers 5 writes for a tiny `kind` model (tests/models.py): Gemma3's rope_parameters
    nested per layer type, LFM2's and Gemma3's layer_types, Phi-3's LongRoPE lists."""
    return tiny_config(kind, 300).to_dict()


def _set(path: str, value):
    def change(c: dict) -> None:
        *outer, last = path.split(".")
        for key in outer:
            c = c[key]
        c[last] = value
    return change


@pytest.mark.parametrize("kind, change, said", [
    ("gemma3", _set("rope_parameters.full_attention.factor", 0), "rope_parameters.full_attention.factor 0 "),
    ("gemma3", _set("rope_parameters.full_attention.factor", -8.0), "rope_parameters.full_attention.factor -8.0 "),
    ("gemma3", _set("rope_parameters.full_attention.factor", "8"), "rope_parameters.full_attention.factor '8' "),
    ("gemma3", _set("rope_parameters.full_attention.factor", float("inf")),
     "rope_parameters.full_attention.factor inf "),
    ("gemma3", _set("rope_parameters.sliding_attention.rope_theta", 0),
     "rope_parameters.sliding_attention.rope_theta 0"),
    ("gemma3", _set("layer_types", ["sliding_attention"]), "layer_types has 1 entries; num_hidden_layers is 2"),
    ("gemma3", _set("layer_types", ["sliding_attention", "chunked_attention"]),
     "layer_types[1] 'chunked_attention' is not one of Gemma3's layer types"),
    ("lfm2", _set("layer_types", ["conv", "full_attention"]), "layer_types has 2 entries; num_hidden_layers is 3"),
    ("lfm2", _set("layer_types", ["conv", "mamba", "conv"]), "layer_types[1] 'mamba' is not one of LFM2's"),
    ("phi3", _set("rope_parameters.long_factor", [4.0] * 23), "rope_parameters.long_factor has 23 values; head_dim 64"),
    ("phi3", _set("rope_parameters.short_factor", [1.0] * 32), "rope_parameters.short_factor has 32 values"),
    ("phi3", _set("rope_parameters.long_factor", [4.0] * 23 + [0.0]), "rope_parameters.long_factor must be a list of "
                                                                       "positive finite numbers"),
    ("phi3", _set("max_position_embeddings", 0), "max_position_embeddings 0 must be a positive integer"),
    ("phi3", _set("rope_parameters.original_max_position_embeddings", 0),
     "rope_parameters.original_max_position_embeddings 0 must be a positive integer"),
    ("gemma3", _set("sliding_window", 0), "sliding_window 0 must be a positive integer"),
])
def test_init_refuses_a_family_config_value_no_model_can_have_in_one_line_naming_the_key_recording_nothing(
        tmp_path, kind, change, said):
    ws = _workspace(tmp_path)
    head = workspace_ledger(ws).head()
    config = _family_config(kind)
    change(config)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    proc = in_process(ws, "init", str(folder), "--name=bad")
    _one_line(proc, "invalid config.json: " + said, "nothing was recorded")
    assert workspace_ledger(ws).head() == head


def test_the_unchanged_tiny_family_configs_are_accepted_at_init(tmp_path):
    """Not blind: what the refusals above start from is a config init records."""
    ws = _workspace(tmp_path)
    for kind in ("gemma3", "lfm2", "phi3"):
        folder = tmp_path / kind
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(_family_config(kind)))
        proc = in_process(ws, "init", str(folder))
        assert proc.returncode == 0, proc.stderr


def test_init_refuses_a_safetensors_file_whose_header_length_is_2_to_the_60_in_one_line_naming_it(tmp_path):
    """The header length is read as 8 bytes and bounded before the header is: no MemoryError at Phase 0 either."""
    ws = _workspace(tmp_path)
    head = workspace_ledger(ws).head()
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(CONFIG.read_text())
    (folder / "model-00001-of-00002.safetensors").write_bytes((1 << 60).to_bytes(8, "little") + b"{}")
    proc = in_process(ws, "init", str(folder), "--name=bad")
    _one_line(proc, f"{folder / 'model-00001-of-00002.safetensors'} is not a readable safetensors file",
              "header length 1152921504606846976 bytes", "nothing was recorded")
    assert workspace_ledger(ws).head() == head


def _tokenizer_folder(tmp_path: Path, write) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(CONFIG.read_text())
    write(folder / "tokenizer.json")
    return folder


@pytest.mark.parametrize("write, said", [
    (lambda f: f.write_text('{"version": "1.0", "model": '), "is not valid JSON (Expecting value at line 1 column 29)"),
    (lambda f: f.write_bytes(b'{"model": "\xff"}'), "is not UTF-8 (byte 11)"),
    (lambda f: f.write_text('{"version": "1.0", "model": {"type": "Bogus"}}'),
     "is not one the tokenizers library loads (data did not match any variant"),
    (lambda f: f.touch() or os.truncate(f, (128 << 20) + 1),  # sparse: refused by its size, never read
     "is 128.0 MiB, over the 128.0 MiB a tokenizer may be"),
])
def test_init_refuses_a_malformed_or_oversized_tokenizer_json_in_one_line_naming_it(tmp_path, write, said):
    ws = _workspace(tmp_path)
    head = workspace_ledger(ws).head()
    folder = _tokenizer_folder(tmp_path, write)
    proc = in_process(ws, "init", str(folder), "--name=bad")
    _one_line(proc, f"tokenizer {folder / 'tokenizer.json'} ", said, "nothing was recorded")
    assert workspace_ledger(ws).head() == head


def test_init_accepts_a_real_tokenizer_json(tmp_path):
    """Not blind: a tokenizer the tokenizers library saved (tests/models.py) is read and loaded."""
    folder = _tokenizer_folder(tmp_path, lambda f: train_tokenizer().backend_tokenizer.save(str(f)))
    proc = in_process(tmp_path / "ws", "init", str(folder))
    assert proc.returncode == 0, proc.stderr


# --- issue 45 item 6: names that look alike, names in NFC ---------------------------------------------------


@pytest.mark.parametrize("existing, new", [
    ("tiny", "t\u0456ny"),  # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I
    ("tiny", "\uff54\uff49\uff4e\uff59"),  # FULLWIDTH t i n y: NFKC
    ("llama_1b", "IIama_lb"),  # 1, I and l share a prototype (confusables.txt)
    ("qwen3-0.6b", "qwen3\u20130.6b"),  # EN DASH
    ("smollm", "SMOLL\u041c"),  # case folded; CYRILLIC CAPITAL LETTER EM
])
def test_init_refuses_a_name_confusable_with_an_existing_deployment_naming_it_and_recording_nothing(
        tmp_path, existing, new):
    ws = _workspace(tmp_path, existing)
    head = workspace_ledger(ws).head()
    proc = in_process(ws, "init", str(CONFIG), f"--name={new}")
    _one_line(proc, "is confusable with deployment " + repr(existing), "nothing was recorded")
    assert workspace_ledger(ws).head() == head


def test_a_name_is_recorded_in_nfc_and_found_however_its_accent_was_typed(tmp_path):
    decomposed, composed = "cafe\u0301", "caf\u00e9"
    ws = tmp_path / "ws"
    assert in_process(ws, "init", str(CONFIG), f"--name={decomposed}").returncode == 0
    assert workspace_ledger(ws).streams("deployment:") == [f"deployment:{composed}"]
    for typed in (decomposed, composed):
        assert in_process(ws, "lesson", typed, "tiles of 64").returncode == 0, typed
    again = in_process(ws, "init", str(CONFIG), f"--name={composed}")
    _one_line(again, "exists already")
    assert len(workspace_ledger(ws).read_stream(f"deployment:{composed}")) == 5  # 3 from init, 2 lessons


def test_an_older_ledger_s_name_that_is_not_nfc_is_still_found_and_its_nfc_twin_is_refused(tmp_path):
    ws = _workspace(tmp_path)
    clone_stream(ws, "m", "cafe\u0301")  # as a ledger written before names were normalised may hold it
    assert in_process(ws, "lesson", "cafe\u0301", "tiles of 64").returncode == 0
    assert len(workspace_ledger(ws).read_stream("deployment:cafe\u0301")) == 4
    head = workspace_ledger(ws).head()
    _one_line(in_process(ws, "init", str(CONFIG), "--name=caf\u00e9"), "is confusable with deployment 'cafe\\u0301'")
    assert workspace_ledger(ws).head() == head
