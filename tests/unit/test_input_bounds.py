"""Inputs that cannot run or read what they should not (issue 35 item 4), at the helpers: input files, MCP
confinement, config sizes, make values, terminal text and printed commands."""

from __future__ import annotations

import io
import json
import os
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from handlers.inputs import CONFIG_MAX_BYTES, InputError, confined, input_file, read_input
from npu_kernels.mlir_air.table import make_value, render_command
from npu_kernels.model.size_bounds import BOUNDS, size_problem
from npu_kernels.model.weights import WeightsError, header_problem, read_header
from registry.names import confusable_with, normalised, skeleton
from registry.text import escaped, ledger_command

CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_fifo_a_character_device_and_a_folder_are_refused_before_being_opened_naming_what_they_are(tmp_path, kind):
    path = {"fifo": tmp_path / "t.fifo", "device": Path("/dev/zero"), "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # opening it to read would block until a writer comes: it is never opened
    what = {"fifo": "a FIFO", "device": "a character device", "folder": "a folder"}[kind]
    for call in (lambda: input_file(path, "transcript"), lambda: read_input(path, "history")):
        with pytest.raises(InputError, match=f"is {what}, not a regular file; refused"):
            call()


def test_a_symbolic_link_to_a_device_is_judged_by_what_it_points_at(tmp_path):
    link = tmp_path / "transcript.txt"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputError, match="a character device"):
        read_input(link, "transcript")


def test_a_file_over_its_cap_is_refused_and_one_at_the_cap_is_read_whole(tmp_path):
    at_cap, over = tmp_path / "config.json", tmp_path / "big.json"
    at_cap.write_bytes(b" " * CONFIG_MAX_BYTES)
    over.write_bytes(b" " * (CONFIG_MAX_BYTES + 1))
    assert len(read_input(at_cap, "config")) == CONFIG_MAX_BYTES
    with pytest.raises(InputError, match=r"over the 1\.0 MiB a config may be"):
        read_input(over, "config")


def test_standard_input_is_read_with_the_same_bound(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * (CONFIG_MAX_BYTES + 10))))
    with pytest.raises(InputError, match="on standard input is over"):
        read_input("-", "evidence")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"PASS!\n")))
    assert read_input("-", "transcript") == b"PASS!\n"


def test_a_path_outside_the_allowed_folders_is_refused_also_through_a_symbolic_link(tmp_path):
    ws, allowed = tmp_path / "ws", tmp_path / "models"
    ws.mkdir(), allowed.mkdir()
    (ws / "run.txt").write_text("PASS!\n")
    (ws / "escape.txt").symlink_to("/etc/passwd")
    assert confined(ws / "run.txt", [ws], "transcript") == (ws / "run.txt").resolve()
    assert confined(allowed / "m", [ws, allowed], "model") == (allowed / "m").resolve()
    for outside in ("/etc/passwd", ws / "escape.txt", ws / ".." / "models" / "m"):
        with pytest.raises(InputError, match="outside the folders this server may read"):
            confined(outside, [ws], "transcript")


def _config(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


@pytest.mark.parametrize("field, value", [
    ("num_hidden_layers", 100_000), ("hidden_size", 65536), ("vocab_size", 10**7),
    ("intermediate_size", 10**6), ("num_attention_heads", 4096), ("max_position_embeddings", 10**8),
])
def test_a_config_size_over_the_bound_is_refused_naming_the_field_the_bound_and_the_model(field, value):
    raw = {**_config("llama-3.2-1b.json"), field: value}
    problem = size_problem(raw)
    assert problem is not None and f"config {field} = " in problem and str(BOUNDS[field]) in problem
    assert "the largest in scope" in problem and "nothing was recorded" in problem


def test_sizes_nested_in_a_text_config_or_under_gpt2_names_are_bounded_too():
    assert "text_config.vocab_size" in size_problem({"text_config": {"vocab_size": 5_000_000}})
    assert "config n_layer = 100000" in size_problem({"n_layer": 100_000})


def test_every_real_config_in_the_fixtures_is_within_the_bounds():
    """Not blind: the published configs of the models in and near scope (up to Mistral-7B, Mixtral-8x7B) pass."""
    for path in sorted(CONFIGS.glob("*.json")):
        assert size_problem(json.loads(path.read_text())) is None, path.name


def test_make_variable_values_have_every_dollar_doubled_and_only_where_make_assigns_them():
    assert make_value("/m/$(shell touch x)") == "/m/$$(shell touch x)"
    command = render_command("make -C {mlir_air}/pe run M={M} NAME={name}",
                             {"mlir_air": "/a$b", "M": 64, "name": "$(shell id)"})
    assert command == "make -C '/a$b'/pe run M=64 NAME='$$(shell id)'"  # -C's argument is a path, not expanded
    assert render_command("python3 x.py --name {name}", {"name": "$HOME"}) == "python3 x.py --name '$HOME'"


def test_terminal_text_is_shown_with_every_control_character_escaped():
    assert escaped("ok \x1b]0;pwned\x07 then\nnext \u202e") == "ok \\x1b]0;pwned\\x07 then\\nnext \\u202e"
    assert escaped("plain text, é and ✅") == "plain text, é and ✅"


def test_printed_commands_quote_the_name_and_put_a_dash_name_after_a_double_dash():
    assert ledger_command("advance", "tiny") == "ledger advance tiny"
    assert ledger_command("advance", "my model") == "ledger advance 'my model'"
    assert ledger_command("advance", "$(id)") == "ledger advance '$(id)'"
    assert ledger_command("resume", "--help", "--note", "...") == "ledger resume --note ... -- --help"


# --- issue 45 item 5: a safetensors header length is bounded before it is read -------------------------------


def _safetensors(path: Path, length: int, header: bytes = b"{}", data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", length) + header + data)
    return path


@pytest.mark.parametrize("length, said", [
    (1 << 60, "its header length 1152921504606846976 bytes is over the 100000000 bytes the safetensors library"),
    (64, "its header length 64 bytes is over the 2 bytes the file holds after the length"),
])
def test_a_safetensors_header_length_past_the_file_or_the_cap_is_one_line_naming_the_file(tmp_path, length, said):
    file = _safetensors(tmp_path / "model.safetensors", length)
    with pytest.raises(WeightsError) as e:
        read_header(file)
    assert str(e.value).startswith(f"{file} is not a readable safetensors file") and said in str(e.value)
    assert header_problem(tmp_path) == str(e.value)


def test_a_safetensors_header_entry_with_offsets_outside_the_data_is_named(tmp_path):
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4096]}}).encode()
    file = _safetensors(tmp_path / "model.safetensors", len(header), header, b"\0" * 4)
    with pytest.raises(WeightsError, match="entry for tensor 'w' is not a dtype, a shape and data offsets within "
                                           "its 4 data bytes"):
        read_header(file)


def test_a_fifo_named_as_a_safetensors_file_is_refused_without_being_opened(tmp_path):
    os.mkfifo(tmp_path / "model.safetensors")  # opening it to read would block until a writer comes
    assert "is not a regular file" in header_problem(tmp_path)


def test_a_real_safetensors_file_is_read_and_a_folder_without_one_has_no_problem(tmp_path):
    from safetensors.numpy import save_file

    save_file({"w": np.ones((2, 3), np.float32)}, str(tmp_path / "model.safetensors"))
    info = read_header(tmp_path / "model.safetensors")["w"]
    assert (info.dtype, info.shape, info.end - info.begin) == ("F32", (2, 3), 24)
    assert header_problem(tmp_path) is None and header_problem(tmp_path / "empty") is None


# --- issue 45 item 6: deployment names that look alike ------------------------------------------------------


@pytest.mark.parametrize("a, b", [
    ("tiny", "t\u0456ny"), ("tiny", "\uff54\uff49\uff4e\uff59"), ("Tiny", "tiny"), ("llama_1b", "IIama_lb"),
    ("model", "rnodel"), ("qwen3-4b", "qwen3\u22124b"), ("phi", "\u0440hi"), ("m0", "mO"),
    ("\U0001d41a", "a"),  # MATHEMATICAL BOLD SMALL A: NFKC
])
def test_names_that_look_alike_have_one_skeleton(a, b):
    assert skeleton(a) == skeleton(b) and confusable_with(b, ["other", a]) == a


@pytest.mark.parametrize("a, b", [("tiny", "tiny2"), ("caf\u00e9", "cafe"), ("qwen3_4b", "qwen3-4b"), ("a", "b")])
def test_names_that_differ_visibly_are_not_confusable(a, b):
    assert skeleton(a) != skeleton(b) and confusable_with(b, [a]) is None


def test_a_name_is_not_confusable_with_itself_and_is_recorded_in_nfc():
    assert confusable_with("tiny", ["tiny"]) is None
    assert normalised("cafe\u0301") == "caf\u00e9" == normalised("caf\u00e9")
