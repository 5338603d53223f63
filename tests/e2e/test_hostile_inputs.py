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
