"""One row per verb: its typed request, its handler, its result, and from them both faces -- the click command
(`handlers.cli.verbs.command_of`) and the MCP tool (`handlers.mcp.call.tool_of` with `input_schema`).

A row (`Verb`) holds:
  name      the CLI's words ("lesson", "registry lookup"); the tool's name is the same with `_` for spaces and `-`
  request   a frozen dataclass: one field per argument, its type the Python annotation, its faces in the field's
            metadata (`arg`): the CLI declaration (`NAME` for a positional argument, `--option` for an option), the
            help line, and the MCP property (a JSON Schema fragment). The click type of an option is derived from
            that fragment (an `enum` is a Choice, `minimum`/`maximum` an IntRange, a boolean a flag) unless the
            field says `click_type` (where the CLI has always been looser or stricter than the tool).
  handle    (VerbCall, request) -> the result as the CLI's --json prints it (`handlers.results` producers); the
            result schema is `results.SCHEMAS[tool]` / `results_workbench.SCHEMAS[tool]`
  render    (result, request) -> `Output`: the CLI's text (stdout and stderr lines); the --json text is the result
  exit      result -> exit status (both CLI modes; the tool returns the result whatever it says)
  post      the one post-commit step both faces share (`post_commit`): "" (reads), "after" (a write that
            succeeded), "recorded" (whatever happened, once the ledger holds the deployment `request.name`); a
            request with a `name` is a deployment's, and only its projections are rebuilt

Every CLI verb with an MCP tool is a row: `NOT_MIGRATED` (empty now) would say why one is still written by hand,
`NOT_TOOLS` says why a verb has no tool (tests/unit/test_verbs.py checks that every CLI verb is a row or in one of
them). Where the faces differ, the row says so, each way once: a field one face lacks (`cli_only`, `tool_only`), a
text form the CLI reads into the tool's typed value (`parse`), a path the tool confines (`path`, `name_or_path`),
the CLI's own order, defaults and requiredness (`cli_order`, `cli_default`, `required`), its progress bars
(`progress`), lines told as the work goes (`VerbCall.tell`: the CLI prints them, the tool sends notifications),
lines after the output (`after`), an output file (`to_file`), its error forms (`cli_errors`, `cli_error_text`,
`cli_fail`, `cli_bad`, `CliError`, `Exit`), an answer before the work (`cli_early`), and a post-commit step only
the tool took (`post_cli`). A handler checks `VerbCall.face` only where the faces did different work before the
table (scaffold's checkout, triage's rules and registry checks, init's memory and note lines).

Imports: handlers (bootstrap, deploy, results, results_workbench, uow; calibrate, narrate when called),
npu_kernels (the twin, the toolchain floor, calibration), registry.text, statemachine.mermaid. Never click and
never the MCP SDK: the faces are made in handlers.cli and handlers.mcp.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from handlers import deploy, results
from handlers import results_workbench as rw
from handlers.bootstrap import App
from handlers.uow import DeploymentUnit, existing_name, stream_id
from ledger import Checkpoint
from npu_kernels.mlir_air.toolchain_floor import PEANO_VERSION, TWIN_PEANO
from npu_kernels.backends.kernel_runners import DEPLOYMENT_EXECUTORS, EXECUTOR_NAMES
from npu_kernels.model.options import FAULT_HELP, FAULTS
from npu_kernels.model.plan import DEFAULT_SEQ, PLAN_WEIGHTS
from npu_kernels.model.speculative import DEFAULT_BLOCK
from npu_kernels.model.q4nx import LAYOUTS
from npu_kernels.perf.q4nx import WEIGHTS
from registry.lookup import CONTRACTS
from registry.nightly_history import FILES as NIGHTLY_FILES
from registry.text import escaped, ledger_command, shown
from statemachine.mermaid import mermaid

_quantize_log = structlog.get_logger("handlers.cli.quantize")  # the quantize line's logger, as before the row
NAME = {"type": "string", "minLength": 1, "description": "deployment name (`ledger status` lists them)"}
TEXT = {"type": "string", "minLength": 1}


def arg(cli: str, schema: dict | None = None, *, help: str | None = None, default: Any = dataclasses.MISSING,
        click_type: Any = None, required: bool | None = None, cli_only: bool = False, tool_only: bool = False,
        path: str | None = None, show_default: bool = False, metavar: str | None = None,
        refuse: str | None = None, parse: Callable[[Any, dict], Any] | None = None, tool_parse: bool = False,
        name_or_path: bool = False, nargs: int | None = None, cli_default: Any = dataclasses.MISSING,
        hidden: bool = False) -> Any:
    """A request field: `cli` its CLI declaration (`NAME`: a positional argument, `--opt`: an option), `schema`
    its MCP property, `help` the CLI's help line (default: none, as a hand-written option without help).
    `click_type` names a click type the fragment does not give: "dir" a click.Path(file_okay=False), "existing
    dir" one that must exist, "file" a click.Path(dir_okay=False), "path" a click.Path(), or a Python type (int,
    str). `required` the CLI's, where it differs from the tool's (an option the CLI requires and the tool
    defaults). `cli_only` / `tool_only`: a field one face lacks (the other takes its default). `path` names what
    a path argument is: the tool takes it only inside the workspace or an --allow-dir folder (`VerbCall.place`),
    the CLI as given. `metavar` the CLI's name of a positional argument (`FILE|-`). `refuse`: a retired CLI flag,
    hidden, whose use is refused with this sentence as the command line is read.

    `parse(text, values)`: the field's text form (`M=..,K=..`, a checkpoint SIZE:HASH) read into its typed value
    (`values`: the other arguments as given, for a form that depends on one); the CLI reads
    what it was given (a ValueError is click's bad parameter: usage, `error: Invalid value for OPTION: ...`, exit
    2), the tool only with `tool_parse` (its property is the same text; a ValueError is the call's one error line)
    and otherwise takes the typed value as JSON (a shape as an object). `name_or_path` (with `path`): a
    deployment name or a path; the tool confines it only when it names something that exists (`plan NAME|CONFIG`).
    `nargs`: a positional argument's click nargs (-1: any number of words). `cli_default`: the CLI's default where
    its type is not the tool's (optimise's --phase: the text "4", the tool's 4, `parse` between); `click_type` a
    tuple: a click.Choice of those words."""
    meta = {"cli": cli, "schema": schema or {}, "help": help, "click_type": click_type, "required": required,
            "cli_only": cli_only or refuse is not None, "tool_only": tool_only, "path": path,
            "show_default": show_default, "metavar": metavar, "refuse": refuse, "parse": parse,
            "tool_parse": tool_parse, "name_or_path": name_or_path, "nargs": nargs, "cli_default": cli_default,
            "hidden": hidden}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Output:
    """What the CLI prints in text mode: (line, to stderr) in order."""

    lines: list[tuple[str, bool]] = field(default_factory=list)

    def out(self, line: str) -> "Output":
        self.lines.append((line, False))
        return self

    def err(self, line: str) -> "Output":
        self.lines.append((line, True))
        return self

    def text(self, text: str) -> "Output":
        """A text of whole lines (each ending in a newline) on stdout, as `sys.stdout.write` writes it."""
        assert text.endswith("\n"), "a text of whole lines"
        self.lines.extend((line, False) for line in text[:-1].split("\n"))
        return self


class CliError(Exception):
    """An error the CLI shows as click's (its whole message after `error: `, exit 1); the tool's is its first
    line as for any error. For a handler that names one branch's failure so (`registry build --into-mlir-air`)."""


class Exit(Exception):
    """The CLI's own refusal: `line` on stderr as it is (no `error: `), exit status `code` (triage's unreadable
    inputs: `triage: ...`, 1). The tool's error line is `error: ` and the line."""

    def __init__(self, line: str, code: int = 1) -> None:
        super().__init__(line)
        self.line, self.code = line, code


def _as_given(value: str, what: str) -> str:
    return value


def _untold(line: str, err: bool = False) -> None:
    return None


@dataclass
class VerbCall:
    """One call of a verb from either face: its App, where its warnings go (the CLI: stderr; MCP: the log),
    where a path argument may lie (the CLI: as given; MCP: `handlers.mcp.call.mcp_call` confines it) and where a
    line said as the work goes goes (`tell`: the CLI prints it, escaped, on stdout or stderr; MCP sends it as a
    progress notification, `handlers.narrate.report`)."""

    app: App
    warn: Callable[[str], None]
    place: Callable[[str, str], str] = _as_given
    place_target: Callable[[str, str], str] = _as_given  # a NAME|PATH argument: MCP confines an existing path
    here: Path = Path(".")  # where an output the caller did not place goes: the CLI's current folder, the workspace
    face: str = "cli"  # or "mcp": for the few checks only one face makes (`Verb.post_cli`)
    tell: Callable[..., None] = _untold  # (line, err=False)
    json: bool = False  # the CLI's --json: no lines told as the work goes (advance's verdicts)
    unit: DeploymentUnit | None = None  # the unit of work a handler folded its deployment's stream in (advance's):
    # the post-commit step renders that deployment's docs from the view it folded (`post_commit`)


@dataclass(frozen=True)
class Verb:
    name: str
    request: type
    handle: Callable[[VerbCall, Any], Any]
    help: str  # the CLI's help (the click docstring)
    description: str  # the tool's description
    render: Callable[[Any, Any], Output]
    exit: Callable[[Any], int] = lambda result: 0
    reads: bool = False  # opens the ledger read-only (both faces)
    writes: str = ""  # what it appends, and through what ("" = it reads only): the tool's `writes`
    long: bool = False  # reports progress; one long tool at a time per MCP server
    progress: str = ""  # the CLI's bars on stderr while it runs (`handlers.narrate.TerminalProgress`): "text"
    # (none under --json) or "always"; the tool's progress notifications come from the server (every call)
    post: str = ""  # "", "after", "after all", "recorded", "recorded writable" or "always": the post-commit
    # projection step (`post_commit`)
    json_indent: int | None = None  # the CLI's --json layout
    json_sort_keys: bool | Callable[[Any], bool] = False  # or (result) -> whether
    json_help: str | None = None
    json: Callable[[Any, Any], Any] | None = None  # (handle's value, request) -> the result; None: the value is
    # the result. With it, `render` gets the handler's own value (a report object), the tool and --json the result
    cli_errors: tuple[type[BaseException], ...] = ()  # the CLI prints these as click's errors (the whole message)
    cli_error_text: Callable[[BaseException], str] | None = None  # what of such an error the CLI prints
    cli_fail: Callable[[BaseException, Any, bool], Output] | None = None  # (error, request, as_json): what the CLI
    # prints before an error's line (registry import's accounts)
    post_cli: bool = True  # False: the post-commit step is the tool's alone (the CLI never took it)
    to_file: str | None = None  # a CLI-only field naming a file the CLI writes its output to instead of stdout
    to_file_line: Callable[[Any, Any], str] | None = None  # (value, request): the line it then prints
    after: Callable[[Any, Any], Output] | None = None  # (value, request): what the CLI prints after its output, in
    # both modes (verify's warnings)
    cli_order: tuple[str, ...] = ()  # the CLI's parameter order (fields and "as_json") where it is not the tool's
    cli_early: Callable[[Any], Output | None] | None = None  # (request): a CLI answer given before the work, in
    # both modes, exit 0 (verify-model --inject list)
    cli_bad: tuple[tuple[type[BaseException], str], ...] = ()  # (error, option): the CLI shows it as click's bad
    # parameter of that option (usage, exit 2)

    @property
    def tool(self) -> str:
        return self.name.replace(" ", "_").replace("-", "_")

    def fields(self) -> list[dataclasses.Field]:
        return list(dataclasses.fields(self.request))

    def call(self, vc: VerbCall, request: Any) -> Any:
        """Run the handler on `request` (its path arguments placed by `vc.place`), then the post-commit step this
        row names; return the result."""
        placed = {f.name: (vc.place_target if f.metadata["name_or_path"] else vc.place)(getattr(request, f.name),
                                                                                        f.metadata["path"])
                  for f in self.fields() if f.metadata["path"] and getattr(request, f.name) is not None}
        request = dataclasses.replace(request, **placed) if placed else request
        if self.reads:
            vc.app.read_only = True
        if self.post and not self.post_cli and vc.face == "cli":
            return self.handle(vc, request)
        if self.post in ("recorded", "recorded writable", "always"):
            try:
                return self.handle(vc, request)
            finally:  # "recorded writable": not when the ledger was opened read-only (audit's verdict alone)
                if self.post != "recorded writable" or not vc.app.opened_read_only:
                    post_commit(vc, getattr(request, "name") if self.post != "always" else None, vc.unit)
        result = self.handle(vc, request)
        if self.post in ("after", "after all"):  # "after all": every deployment's docs, not only request.name's
            post_commit(vc, getattr(request, "name", None) if self.post == "after" else None)
        return result

    def result(self, value: Any, request: Any) -> Any:
        """The result (the tool's, the CLI's --json) of the handler's `value`."""
        return value if self.json is None else self.json(value, request)

    def request_from(self, arguments: dict[str, Any]) -> Any:
        """The request from a tool's arguments (the schema's defaults filled in already; absent = the field's)."""
        def value(f: dataclasses.Field) -> Any:
            given = arguments[f.name]
            return f.metadata["parse"](given, arguments) if f.metadata["tool_parse"] and given is not None else given

        return self.request(**{f.name: value(f) for f in self.fields() if f.name in arguments})


def post_commit(vc: VerbCall, name: str | None = None, unit: DeploymentUnit | None = None) -> None:
    """The one step after a command that may have recorded something, shared by the CLI and the MCP tools: rebuild
    the projections and keep the ledger's new checkpoint (`App.refresh_projections`), its warnings to `vc.warn`.

    With `name` (a command that appends to deployment NAME's stream alone): only when the ledger holds NAME (a
    misspelt name recorded nothing, so it writes no kernel_registry/ or llms/ into the folder either), and then
    the registry and NAME's docs alone -- no other deployment's docs read that stream. The events are the ledger's
    `all_events`, whose cache the command's own appends extended (`ledger.record.ReadsEverything.recorded`). With
    `unit` (the unit of work the command folded NAME's stream in), NAME's docs are rendered from the view it folded
    (`DeploymentUnit.view`), not from a second fold of the stream; a view another writer's append has overtaken
    is not used (`registry.model_fold.current`)."""
    app = vc.app
    if name is not None:
        name = existing_name(app.ledger, name)  # as the command's unit named it (NFC unless the ledger holds it so)
        if not app.ledger.stream_version(stream_id(name)):  # the version, not a read of the stream
            return
    folded = [unit.view()] if unit is not None and unit.events else []
    for line in app.refresh_projections(only=None if name is None else [name], folded=folded):
        vc.warn(line)


def field_type(f: dataclasses.Field) -> tuple[type, bool]:
    """(the base type, whether None is allowed) of a request field's annotation."""
    hint = f.type if not isinstance(f.type, str) else eval(f.type, {**vars(typing), **vars(types), **globals()}, {})  # noqa: S307
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        base = next(a for a in args if a is not type(None))
        return base, type(None) in args
    return hint, False


_JSON_TYPE = {str: "string", int: "integer", bool: "boolean", float: "number"}


def input_schema(verb: Verb) -> dict:
    """The tool's input schema: each field's MCP property (its JSON type from the annotation unless the fragment
    names one, its default), required when the field has no default; misspelt arguments refused."""
    props, required = {}, []
    for f in verb.fields():
        if f.metadata["cli_only"]:
            continue
        base, _ = field_type(f)
        prop = {"type": _JSON_TYPE.get(base), **f.metadata["schema"]}  # a parsed field's fragment names its type
        if f.default is not dataclasses.MISSING and f.default is not None and "default" not in prop:
            prop["default"] = f.default
        props[f.name] = prop
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


# --- the rows -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LessonRequest:
    name: str = arg("NAME", NAME)
    text: str = arg("TEXT", TEXT)
    phase: int | None = arg("--phase", {"minimum": 0, "maximum": 7}, default=None)


def _lesson(vc: VerbCall, r: LessonRequest):
    return results.lesson_json(r.name, deploy.lesson(vc.app.ledger, r.name, r.text, r.phase))


@dataclass(frozen=True)
class ResumeRequest:
    name: str = arg("NAME", NAME)
    note: str = arg("--note", {**TEXT, "description": "what the human fixed"}, help="what the human fixed")


def _resume(vc: VerbCall, r: ResumeRequest):
    deploy.resume(vc.app.ledger, r.name, r.note)
    return results.resume_json(r.name, deploy.status(vc.app.ledger, r.name)[0]["status"])


@dataclass(frozen=True)
class StatusRequest:
    name: str | None = arg("NAME", NAME, default=None)


def _status(vc: VerbCall, r: StatusRequest):
    return results.status_json(deploy.status(vc.app.ledger, r.name), r.name)


def _status_rows(result) -> list[dict]:
    return result if isinstance(result, list) else [result]


def status_row(name: str, status: str, passed: str, where: str, verdict: str) -> str:
    """One line of `ledger status`'s table (its header too): name, status, the phases passed, executor/target and
    the last verdict in columns."""
    return f"{name:<28} {status:<20} {passed:<16} {where:<20} {verdict}".rstrip()


def _status_text(result, r: StatusRequest) -> Output:
    rows, out = _status_rows(result), Output()
    if not rows:
        out.out("no deployments yet (ledger init MODEL)")
    elif any(row["status"] != "unreplayable" for row in rows):
        out.out(status_row("deployment", "status", "phases passed", "executor/target", "last verdict"))
    for row in rows:
        if row["status"] == "unreplayable":
            out.err(f"{shown(row['name']):<28} unreplayable: {shown(row['error'])}")
            continue
        passed = ",".join(map(str, row["phases_passed"])) or "none yet"
        out.out(escaped(status_row(shown(row["name"]), row["status"], passed, f"{row['executor']}/{row['target']}",
                                   row["last_verdict"])))
        for b in row["blockers"]:
            out.out(escaped(f"    blocker (seq {b['seq']}, phase {b['phase']}): {b['reason']}"))
        if row.get("inconclusive"):
            i = row["inconclusive"]
            out.out(escaped(f"    INCONCLUSIVE (seq {i['seq']}, phase {i['phase']} attempt {i['attempt']}, "
                            f"{i['tries']} tries; {i['in_a_row']} in a row, a blocker at {i['limit']}): "
                            f"{'; '.join(i['reasons'])}"))
        if row["triage"]:
            out.out(escaped(f"    triage of seq {row['triage']['subject_seq']}: {row['triage']['summary']}"))
            for m in row["triage"]["matches"]:
                out.out(escaped(f"      - {m['rule_id']} ({m['confidence']:.2f}): {m['root_cause']} -> {m['remedy']}"))
    return out


@dataclass(frozen=True)
class HistoryRequest:
    name: str = arg("NAME", NAME)


def _history(vc: VerbCall, r: HistoryRequest):
    return results.history_json(deploy.history(vc.app.ledger, r.name))


def _history_text(rows, r) -> Output:
    from handlers.narrate import describe  # the timeline's one-line descriptions

    out = Output()
    for row in rows:
        out.out(escaped(f"{row['seq']:>6}  {row['at'][:19]}  {row['type']:<24} {describe(row['type'], row['payload'])}"))
    return out


@dataclass(frozen=True)
class NoRequest:
    """A verb without arguments."""


@dataclass(frozen=True)
class LogRequest:
    stream_id: str | None = arg("--stream", {**TEXT, "description": "only this stream, e.g. deployment:NAME "
                                             "(`--stream`)"}, default=None,
                                help="only this stream (e.g. deployment:smollm2_135m_instruct)")
    after: int = arg("--after", {"minimum": 0}, default=0, help="only events after this seq", click_type=int)


def _log(vc: VerbCall, r: LogRequest):
    ledger = vc.app.ledger
    events = ledger.read_stream(r.stream_id) if r.stream_id else ledger.read_all(after=r.after)
    return rw.log_json([e for e in events if e.seq > r.after])


def _short(payload: dict, limit: int = 110) -> str:
    text = json.dumps(payload, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _log_text(events, r) -> Output:
    out = Output()
    for e in events:
        out.out(escaped(f"{e['seq']:>6}  {e['recorded_at'][:19]}  {shown(e['stream_id'])}@{e['version']}  "
                        f"{e['type']:<22} {_short(e['payload'])}"))
    return out


def _head(vc: VerbCall, r: NoRequest):
    checkpoint = vc.app.ledger.head()
    identity = vc.app.ledger.identity()
    warning = vc.app.keep_checkpoint(checkpoint)
    if warning:
        vc.warn(warning)
    return rw.head_json(checkpoint, identity)


def _graph(vc: VerbCall, r: NoRequest):
    return rw.graph_json(mermaid())


@dataclass(frozen=True)
class CalibrateRequest:
    name: str | None = arg("--name", {**TEXT, "maxLength": 120, "description": "the calibration's name (default "
                                      "calibration-<n>)"}, default=None,
                           help="the calibration's name (default calibration-<n>)", click_type=str)
    device: str | None = arg("--device", {**TEXT, "description": "only the runs recorded on this device"}, default=None,
                             help="only the runs recorded on this device (as their provenance names it)")


def _calibrate(vc: VerbCall, r: CalibrateRequest):
    from handlers.calibrate import calibrate  # the fit's numerics: loaded when a calibration is asked for
    from npu_kernels.perf.calibration import CalibrationError

    try:
        return results.calibrate_json(calibrate(vc.app.ledger, r.name, r.device))
    except CalibrationError as e:
        raise CalibrationError(f"{e}; nothing was recorded") from None


def _calibrate_text(out, r) -> Output:
    text = Output().out(escaped(f"{out['name']} recorded at seq {out['seq']}: {len(out['rows'])} NPU2-measured "
                                f"figures ({', '.join(d for d in out['devices'] if d) or 'device unnamed'})"))
    for cname, c in out["constants"].items():
        fixed = " (too small to fit: published value kept)" if c["group"] in out["fixed"] else ""
        text.out(f"  {cname:<16} {c['value']:.4g} ± {c['error']:.2g} {c['unit']} (published {c['published']:.4g}){fixed}")
    bars = ", ".join(f"{k} ±{v:.1%}" for k, v in out["error_bars"].items())
    text.out(f"  figure error bars (2 x leave-one-out RMS): {bars}")
    for row in out["left_out"]:  # never fitted: the audit's check or physics refuses its figures
        text.out(escaped(f"  left out, implausible: {row['label']}: {row['why']}"))
    return text


@dataclass(frozen=True)
class TwinRequest:
    directory: str = arg("DIRECTORY", {**TEXT, "description": "the folder to write the stand-in checkout into"},
                         click_type="dir", path="twin directory")
    peano: str = arg("--peano", {"pattern": f"^{PEANO_VERSION}$", "description": "the Peano version the twin's "
                                 "toolchain record says"}, default=TWIN_PEANO, show_default=True,
                     help="the Peano (llvm-aie) version the twin's toolchain record says (`ledger doctor` checks its "
                          "floor)")


def _twin(vc: VerbCall, r: TwinRequest):
    from npu_kernels.mlir_air.twin import write_twin

    if not re.fullmatch(PEANO_VERSION, r.peano):  # the tool's schema has the pattern; the CLI's option is text
        raise ValueError(f"--peano {escaped(r.peano)} is not a version (e.g. {TWIN_PEANO})")
    return rw.twin_json(write_twin(r.directory, peano=r.peano))


@dataclass(frozen=True)
class DoctorRequest:
    mlir_air_dir: str | None = arg("MLIR_AIR_DIR", {**TEXT, "description": "an mlir-air checkout (default: the "
                                                    "server's $MLIR_AIR_DIR)"}, default=None, click_type="dir",
                                   path="mlir-air checkout")


def _doctor(vc: VerbCall, r: DoctorRequest):
    from handlers.workbench import doctor_report  # ValueError: no checkout given or found

    return rw.doctor_json(doctor_report(r.mlir_air_dir))


def _doctor_text(report: dict, r: DoctorRequest) -> Output:
    """The table, or the toolchain floor's refusal alone (one `error:` line): nothing built with it is usable."""
    if report["toolchain_refusal"]:
        return Output().err(f"error: {escaped(report['toolchain_refusal'])}")
    out = Output()
    if report["toolchain_warning"]:
        out.err(f"warning: {report['toolchain_warning']}")
    for line in doctor_lines(report):
        out.out(line)
    return out


def doctor_lines(report: dict) -> list[str]:
    """The table `ledger doctor` prints: a line per finding; in a twin, the checks that read the stand-in's own
    copy of a file (not one in the directory) say so, and a line above the table says how many."""
    findings = report["findings"]
    rows = [("file", "checks", "status", "what differs")]
    for f in findings:
        absent = ", ".join(f["absent"] if f["status"] == "new" else map(repr, f["absent"]))
        note = f"read the twin's own copy, {f['twin_copy']}" if f["twin_copy"] else ""
        if f["status"] == "n/a" and f.get("since") and not report["twin"]:  # a file mlir-air added later
            note = (f"not in this checkout: added upstream after {report['contract_commit'][:7]} (read at "
                    f"{f['since'][:7]}): {f['what']}")
        rows.append((f["file"], f["kind"], f["status"],
                     "; ".join(x for x in (absent or ("file not found" if f["status"] == "missing" else ""), note) if x)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"checkout {report['checkout']} (commit {report['commit'] or 'unknown'}) against mlir-air contract "
             f"v{report['contract_version']} (read at {report['contract_commit'][:7]})"]
    copies = sum(1 for f in findings if f["twin_copy"])
    if report["twin"]:
        lines.append(f"a `ledger twin` stand-in: {copies} check(s) read npu-ledger's own copy of the file (named in "
                     "the last column), not a file of this directory; n/a: no such file in a twin")
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3] for r in rows]
    failing = [f for f in findings if f["fails"]]
    lines.append(f"{len(failing)} difference(s) in {len({f['file'] for f in failing})} file(s)" if failing
                 else "no difference: the checkout meets the contract")
    return lines


@dataclass(frozen=True)
class QuantizeRequest:
    folder: str = arg("FOLDER", {**TEXT, "description": "the bf16 HF folder"}, click_type="existing dir",
                      path="model folder")
    out: str = arg("OUT", {**TEXT, "description": "the bundle file (model.q4nx inside, when a folder)"},
                   click_type="path", path="output")
    to: str = arg("--to", {"enum": ["q4nx"]}, default="q4nx", required=True, help="the 4-bit format")
    layout: str = arg("--layout", {"enum": list(LAYOUTS)}, default="llama", show_default=True,
                      help="llama: I16 blocks, w = scale*(q - min); qwen3: I8 packed chunks, w = scale*q + min")


def _quantize(vc: VerbCall, r: QuantizeRequest):
    """A bf16 model as a Q4NX bundle (npu_kernels.model.q4nx_bundle.write_bundle), so a 4-bit deployment needs no
    download. OUT is a file (`model.q4nx` is written inside OUT when it is a folder). Matrices whose sides are not
    whole 32x256 blocks are padded with zero rows/columns (zero codes, scales and mins); the text says which.
    Every projection of every layer is quantised (npu_kernels.model.q4nx_bundle.projection_names: q/k/v/o,
    gate/up/down, LFM2's conv in/out), the count printed as N of N; a family whose projections the bundle cannot
    name is refused in one line."""
    from handlers.workbench import quantize_folder

    written = quantize_folder(r.folder, r.out, r.layout, r.to)
    _quantize_log.info("quantized", folder=r.folder, out=str(Path(written["path"])), layout=r.layout, sha256=written["sha256"])
    return rw.quantize_json(written)


def _quantize_text(written: dict, r: QuantizeRequest) -> Output:
    pads = ", ".join(written["padded"]) or "none"
    return Output().out(
        f"wrote {Path(written['path']).name} ({r.layout} layout, {written['n_projections']} of "
        f"{written['n_projections_total']} projections 4-bit, {written['n_bf16']} tensors bf16 (norms, biases, conv "
        f"taps, embedding, LM head), {written['bytes'] / 2**20:.1f} MiB, sha256 {written['sha256'][:12]}); "
        f"zero-padded to whole 32x256 blocks: {pads}")


CHECKOUT = {**TEXT, "description": "an mlir-air checkout (default: the server's $MLIR_AIR_DIR)"}


@dataclass(frozen=True)
class ScaffoldRequest:
    name: str = arg("NAME", NAME)
    mlir_air_dir: str | None = arg("--mlir-air-dir", CHECKOUT, default=None, tool_only=True,
                                   path="mlir-air checkout")  # the CLI's is $MLIR_AIR_DIR
    stand_in: str | None = arg("--stand-in", {"enum": ["emulated"], "description": "the adapter wraps npu-ledger's "
                               "emulated pipeline; required on a twin (no NPU)"}, default=None,
                               help="the adapter wraps npu-ledger's emulated pipeline (mlir-air's verify runner judges "
                                    "it on a CPU); required on a twin, where a hardware directory cannot run")


def _scaffold(vc: VerbCall, r: ScaffoldRequest):
    from handlers.workbench import mlir_air_dir, scaffold_deployment
    from npu_kernels.settings import env_get

    root = r.mlir_air_dir or env_get("MLIR_AIR_DIR")
    if vc.face == "mcp":  # the tool names a missing checkout before it reads the deployment
        root = mlir_air_dir(root)
    return rw.scaffold_json(scaffold_deployment(vc.app.ledger, vc.app.workspace, r.name, root, r.stand_in))


def _scaffold_text(out: dict, r) -> Output:
    return Output().out(f"{out['dir']}: wrote {', '.join(out['written']) or 'nothing'}"
                        + (f"; kept the engineer's {', '.join(out['kept'])}" if out["kept"] else ""))


def _scaffold_errors() -> tuple[type[BaseException], ...]:
    from npu_kernels.mlir_air.scaffold import ScaffoldError

    return (ScaffoldError, ValueError)


@dataclass(frozen=True)
class RegistryImportRequest:
    directory: str = arg("DIRECTORY", {**TEXT, "description": "an mlir-air kernel_registry/ (or details/)"},
                         click_type="existing dir", path="registry folder")
    allow_skip: bool = arg("--allow-skip", default=False,
                           help="import what can be imported even when some rows cannot")
    sweep_dtype: str = arg("--sweep-dtype", {"enum": ["bf16", "f32"]}, default="bf16", show_default=True,
                           cli_only=True, help="the registry a sweep_gemm.py results / --emit file there is for (the "
                                               "script's --dtype; its rows do not say)")


def _registry_import(vc: VerbCall, r: RegistryImportRequest):
    """An mlir-air registry imported, one account per table (`handlers.registry_ops.import_registry_accounted`);
    `SkippedRows`: nothing imported, the accounts say which rows and why (the CLI prints them before the error)."""
    from handlers.registry_ops import import_registry_accounted

    return import_registry_accounted(vc.app.ledger, r.directory, allow_skip=r.allow_skip, sweep_dtype=r.sweep_dtype)


def _accounts(accounts, as_json: bool, err: bool = False) -> Output:
    out = Output()
    if as_json:
        out.lines.append((json.dumps(rw.registry_import_json(accounts), indent=2), err))
        return out
    rows = [("kernel", "file", "read", "imported", "duplicate", "skipped", "why")]
    rows += [(a.kernel, a.file, str(a.read), str(a.imported), str(a.duplicate), str(len(a.skipped)),
              a.why + (f" [header: {a.header}]" if a.skipped and "no schema" in a.why else ""))
             for a in accounts]
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for r in rows:
        out.lines.append(("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[6], err))
    return out


def _registry_import_text(result, r) -> Output:
    return _accounts(result.accounts, False).out(
        f"imported {result.added} new events into registry:import"
        + (f"; {result.skipped} row(s) skipped (--allow-skip)" if result.skipped else ""))


def _registry_import_fail(e: BaseException, r, as_json: bool) -> Output:
    from handlers.registry_ops import SkippedRows

    return _accounts(e.result.accounts, as_json, err=True) if isinstance(e, SkippedRows) else Output()


@dataclass(frozen=True)
class RegistryBuildRequest:
    out: str | None = arg("--out", default=None, click_type="dir", cli_only=True,
                          help="output root (default: the workspace)")
    check: bool = arg("--check", {"default": False, "description": "write nothing; report what differs"},
                      default=False, help="write nothing; exit 1 if any file on disk differs from the projection")
    into_mlir_air: str | None = arg(
        "--into-mlir-air", {**CHECKOUT, "description": "add the ledger's new NPU2 rows to this checkout's "
                            "kernel_registry/ instead"}, default=None, click_type="existing dir",
        path="mlir-air checkout", help="add the ledger's new hardware rows to this mlir-air checkout's "
        "kernel_registry/ (its tables' own columns, its GEMM JSON), leaving its prose and rows as they are")


def _registry_build(vc: VerbCall, r: RegistryBuildRequest):
    """{"added": rows per file} (--into-mlir-air), else {"result": the build, "out": its root}."""
    from handlers.registry_merge import merge_into_mlir_air
    from handlers.registry_ops import build_projections

    events = vc.app.ledger.read_all()
    if r.into_mlir_air:
        try:
            return {"added": merge_into_mlir_air(events, r.into_mlir_air)}
        except FileNotFoundError as e:
            raise CliError(str(e)) from None
    out = Path(r.out) if r.out else vc.app.workspace
    return {"result": build_projections(events, out, check=r.check), "out": out, "check": r.check}


def _registry_build_json(value: dict, r: RegistryBuildRequest):
    return (rw.registry_merge_json(value["added"]) if "added" in value
            else rw.registry_build_json(value["result"], r.check))


def _registry_build_text(value: dict, r: RegistryBuildRequest) -> Output:
    from handlers.registry_ops import link_message

    text = Output()
    if "added" in value:
        for rel, n in sorted(value["added"].items()):
            text.out(f"{rel}: {n} row(s) added")
        return text.out(f"added {sum(value['added'].values())} row(s) to {r.into_mlir_air}" if value["added"]
                        else f"nothing new for {r.into_mlir_air}")
    result, out, check = value["result"], value["out"], r.check
    for rel in result.links:
        text.err(f"{'link' if check else 'refused'}: {link_message(out, rel)}")
    if not check:
        return text.out(f"wrote {len(result.written)} of {result.total} files under {out}")
    for rel in result.differing:
        text.err(f"{'missing' if rel in result.missing else 'differs'}: {rel}")
    for rel in result.stray:
        text.err(f"stray: {rel} (no projection writes it)")
    for clash in result.clashes:
        text.err(f"clash: {clash}")
    if not result.clean:
        return text.err(f"{len(result.differing)} of {result.total} projected files differ from the ledger, "
                        f"{len(result.stray)} stray file(s), {len(result.clashes)} folder clash(es), "
                        f"{len(result.links)} symbolic link(s) in the way; rebuild with `ledger registry build` and "
                        "remove the stray files and links")
    return text.out(f"all {result.total} projected files match the ledger")


def _registry_build_exit(value: dict) -> int:
    if "added" in value:
        return 0
    result = value["result"]
    return int(not result.clean if value["check"] else bool(result.links))


@dataclass(frozen=True)
class ImportHistoryRequest:
    file: str = arg("FILE", {**TEXT, "description": "history / sweep_history / prefill_sweep_history ndjson"},
                    click_type="file", path="history file")


def _import_history(vc: VerbCall, r: ImportHistoryRequest):
    from handlers.nightly_ops import BadLine, import_history

    if vc.face == "cli" and not (Path(r.file).exists() or Path(r.file).is_symlink()):
        raise BadLine(f"{r.file}: no such file; nothing was imported")  # a FIFO or device: refused by the reader
    try:
        out = import_history(vc.app.ledger, r.file)
    except BadLine as e:  # one `error: ...` line (exit 1 on the CLI)
        raise BadLine(f"{e}; nothing was imported") from None
    return rw.import_history_json(out)


def _import_history_text(out: dict, r) -> Output:
    kinds = ", ".join(f"{n} {NIGHTLY_FILES[s]}" for s, n in sorted(out["series"].items()))
    return Output().out(f"{out['file']}: {out['read']} line(s) read ({kinds}); {out['added']} new to the ledger")


@dataclass(frozen=True)
class ExportHistoryRequest:
    series: str = arg("--series", {"enum": sorted(NIGHTLY_FILES)}, default="history", show_default=True,
                      help="history.ndjson, sweep_history.ndjson or prefill_sweep_history.ndjson lines")
    model: str | None = arg("--model", {**TEXT, "description": "only this mlir-air model directory name"},
                            default=None, help="only this mlir-air model directory name", click_type=str)
    out: str | None = arg("--out", default=None, help="write here instead of stdout", click_type="file",
                          cli_only=True)
    modelled: bool = arg("--modelled", {"default": False, "description": "also the modelled / emulator / rehearsal "
                         "figures, each line's model suffixed with its class (`--modelled`)"}, default=False,
                         help="also the modelled / emulator / rehearsal figures, each line's model suffixed with its "
                              "class (e.g. 'smollm2_135m_instruct (modelled NPU2)') so mlir-air's dashboard cannot "
                              "show it as measured")
    include_not_measured: bool = arg(  # it wrote modelled figures under the bare model name
        "--include-not-measured", default=False,
        refuse="--include-not-measured is gone: it wrote modelled figures under the bare model name, which mlir-air's "
               "dashboard shows as NPU2 measurements; use --modelled (each such line's model then names its class)")


def _export_history(vc: VerbCall, r: ExportHistoryRequest):
    from handlers.nightly_ops import export_history

    skipped: list[str] = []
    lines = export_history(vc.app.ledger.read_all(), r.series, r.model, r.modelled, skipped)
    for why in skipped:  # a record whose figures cannot be lines (zero, negative, not finite): named, not written
        vc.tell(f"warning: {why}", err=True)
    return lines


@dataclass(frozen=True)
class VerifyRequest:
    against: Checkpoint | None = arg("--against", {**TEXT, "description": "a checkpoint SIZE:HASH printed by "
                                     "`ledger head`"}, default=None, click_type=str, parse=lambda text, _: Checkpoint.parse(text),
                                     tool_parse=True, help="a checkpoint SIZE:HASH printed earlier by `ledger head`")


def _verify(vc: VerbCall, r: VerifyRequest):
    """(the chain report, the warning when its head could not be kept, the ledger's dialect):
    `handlers.queries.verify_chain`."""
    from handlers.queries import verify_chain

    report, warning = verify_chain(vc.app, r.against)
    if vc.face == "mcp":  # the CLI prints them after its report (`_verify_warnings`)
        for line in report.warnings + ([warning] if warning else []):
            vc.warn(line)
    return report, warning, vc.app.ledger.dialect


def _verify_text(value, r) -> Output:
    report, _, dialect = value
    out = Output()
    if report.ok:
        return out.out(f"ledger intact: {report.checked} events, head {report.head}")
    for p in report.problems:
        where = f" ({p.describe_checkpoint()})" if p.checkpoint else ""
        out.err(f"ledger BROKEN at seq {p.seq}: {p.reason}{where}")
    for name in report.missing_triggers:
        out.err(f"ledger BROKEN: immutability trigger {name} is missing ({dialect}): rows can be updated or deleted")
    for name in report.disabled_triggers:
        out.err(f"ledger BROKEN: immutability trigger {name} is disabled ({dialect}): rows can be updated or deleted")
    for name in report.altered_triggers:
        out.err(f"ledger BROKEN: immutability trigger {shown(name)} is not the definition the tool installs "
                f"({dialect}): it may not fire")
    for name in report.extra_triggers:
        out.err(f"ledger BROKEN: trigger {shown(name)} on the events table is not one the tool installs ({dialect}): "
                "it can swallow or change appends")
    for deviation in report.schema_deviations:  # the database's own text: escaped, it may hold anything
        out.err(escaped(f"ledger BROKEN ({dialect}): {deviation.line()}: it can refuse or change appends"))
    return out


def _verify_warnings(value, r) -> Output:
    report, warning, _ = value
    out = Output()
    for line in report.warnings + ([warning] if warning else []):
        out.err(line if line.startswith("warning:") else f"warning: {line}")
    return out


@dataclass(frozen=True)
class PlanRequest:
    target: str = arg("TARGET_", {**TEXT, "description": "deployment NAME, or a config.json / HF folder path"},
                      metavar="TARGET_", path="config", name_or_path=True)
    platform: str | None = arg("--target", {"enum": ["npu2", "npu1"], "description": "NPU target of a CONFIG "
                               "(default npu2)"}, default=None)
    seq: int = arg("--seq", {"minimum": 1, "maximum": 1 << 20, "default": DEFAULT_SEQ, "description": "padded "
                   "prefill length the prefill rows are planned at (registry rows measured at that M where imported, "
                   "else heuristic)"}, default=DEFAULT_SEQ, show_default=True,
                   help="the padded prefill length the prefill rows are planned at (e.g. 4096: GEMM M=4096, registry "
                        "rows measured there by sweep_gemm.py where imported, else heuristic)")
    weights: str | None = arg("--weights", {"enum": list(PLAN_WEIGHTS), "description": "plan for these weights "
                              "(default: a deployment's own, else bf16)"}, default=None,
                              help="plan for these weights: bf16, q4nx-host (dequantised at load: the bf16 rows) or "
                                   "q4nx-device (4-bit GEMVs in decode, dequant at load); default: a deployment's own "
                                   "(as its Phase 1 plans), else bf16")


def _plan(vc: VerbCall, r: PlanRequest):
    """{"rows": the plan (the registry's measured rows first, then the heuristic), "limit": the model's position
    limit, read again for the text's prefill line only (`handlers.queries.model_target`)}."""
    from handlers.queries import model_target, plan_result
    from npu_kernels.model.config import position_limit

    rows = plan_result(vc.app, r.target, r.platform, r.weights, r.seq)
    return {"rows": rows, "limit": lambda: position_limit(model_target(vc.app, r.target, r.platform)[0])}


def _plan_text(value: dict, r) -> Output:
    out, limit = Output(), value["limit"]()
    if limit is not None and limit < DEFAULT_SEQ:  # say why the prefill rows are shorter than the usual build
        out.out(f"prefill planned at {limit} positions: the model has no more (its context window, "
                f"max_position_embeddings, or its RoPE tables), fewer than the {DEFAULT_SEQ} build")
    for line in plan_lines(value["rows"]):
        out.out(line)
    return out


def plan_lines(rows) -> list[str]:
    """`ledger plan`'s text: a line per row, its source, its warnings. A warning whose explanation (what follows
    its first ": ") an earlier row printed is shortened to its own head and "(as above)": the buffer-descriptor
    and low-K warnings name each row's dims but explain the same thing on every row."""
    lines, explained = [], set()
    for r in rows:
        shape = r.shape_text
        j = r.to_json()
        tile = j.get("tile", {})
        contract = f"{r.contract} ({r.method})" if r.method else r.contract
        lines.append(f"{r.phase:<8} {r.kernel:<16} {shape:<44} {r.role:<22} {contract:<24} "
                     f"{json.dumps(tile.get('tile', tile))}")
        lines.append(f"{'':<8} source: {r.source}")
        for w in j.get("warnings", []):
            head, sep, why = w.partition(": ")
            lines.append(f"{'':<8} warning: {head} (as above)" if sep and why in explained else f"{'':<8} warning: {w}")
            explained.add(why)
    return lines


def _target_error() -> tuple[type[BaseException], ...]:
    from handlers.queries import TargetError

    return (TargetError,)


@dataclass(frozen=True)
class PredictRequest:
    target: str = arg("CONFIG|NAME", {**TEXT, "description": "config.json / HF folder path, or deployment NAME"},
                      metavar="CONFIG|NAME", path="config", name_or_path=True)
    seq: int | None = arg("--seq", {"minimum": 1, "maximum": 131072, "description": "prefill length (default: the "
                          "build's, 2048 cut to the context window)"}, default=None,
                          help="prefill length (default: the deployment's build, 2048 cut to the model's context "
                               "window)")
    ctx: int | None = arg("--ctx", {"minimum": 1, "maximum": 131072, "description": "decode context length (default "
                          "128, cut to the context window)"}, default=None,
                          help="decode context length (default 128, cut to the model's context window)")
    switches: str | None = arg("--switches", {"description": "comma-separated switches that are ON (fusion, "
                               "weight_residency, intermediate_bos, seq_first), 'none' for all off; default all on"},
                               default=None, click_type=str,
                               help="comma-separated switches that are ON (fusion, weight_residency, intermediate_bos, "
                                    "seq_first; 'none' for all off); default: all on")
    calibration: str | None = arg("--calibration", {**TEXT, "description": "the `perf_calibrate` fit to report with "
                                  "(default the latest; 'published': mlir-air's published machine)"}, default=None,
                                  click_type=str, help="the `ledger perf calibrate` fit to report with (default: the "
                                  "ledger's latest; 'published': mlir-air's published machine)")
    weights: str = arg("--weights", {"enum": list(WEIGHTS), "default": "bf16", "description": "bf16; q4nx-host "
                       "(dequantised at load); q4nx-device (4-bit decode on the NPU)"}, default="bf16",
                       show_default=True, help="how the projections are stored: bf16; q4nx-host (4-bit, dequantised "
                       "at load: the bf16 pipeline); q4nx-device (4-bit on the NPU: fused one-dispatch decode of 4-bit "
                       "GEMVs, npu_kernels.perf.q4nx)")
    host_memory_gib: float | None = arg("--host-memory-gib", {"minimum": 0.1, "description": "the target machine's "
                                        "memory, to check that the resident BOs fit it"}, default=None,
                                        help="the target machine's memory, to check that the resident BOs fit it "
                                             "(NPU2 shares host DDR)")
    curve: bool = arg("--curve", {"default": False, "description": "TTFT against padded prefill length and decode "
                      "tokens/s against context (seq / ctx do not apply), with a PNG"}, default=False,
                      help="TTFT / prefill tokens/s against padded prefill length and decode tokens/s against context "
                           "(the lengths and contexts are the curve's own: --seq / --ctx do not apply), with a PNG")
    png: str | None = arg("--png", {**TEXT, "description": "with curve: where the PNG goes (default <name>_curve.png "
                          "in the workspace)"}, default=None, click_type="file", path="png",
                          help="with --curve: where the PNG goes (default <name>_curve.png here)")


def _predict(vc: VerbCall, r: PredictRequest):
    """{"value": the result, "curve": the curve (--curve) or "prediction": the modelled profile}: the PNG of a
    curve at `png`, else <name>_curve.png in `vc.here` (the CLI's current folder, the tool's workspace).

    `ledger predict CONFIG|NAME`: the modelled NPU2 TTFT, decode rate and per-ELF breakdown of a model.

    CONFIG is a config.json or a local HF folder (resolved by npu_kernels.model.architecture); an out-of-scope model
    (MoE, sliding window, MLA, encoder-decoder, non-SwiGLU) ends as one `error:` line and exit status 1.
    NAME (a deployment) is predicted from its folded ConfigResolved; the Phase 6 page of a deployment carries the
    per-ELF chart of its own switches (`registry.model_pages.render_phase6`).

    `--curve` gives prefill length and decode context as axes instead of one point (npu_kernels.perf.curve): TTFT and
    prefill tokens/s against padded prefill length (each point the deployment compiled for that length), decode
    tokens/s against context, as markdown tables (or `--json`) and a PNG beside them (`--png PATH`, default
    `<target name>_curve.png` in the current directory). Its build-length point and its Phase 6 context point are
    exactly the figures `ledger predict` gives without `--curve`.

    Without `--curve` the lengths default to the deployment's build (2048 and 128, cut to the model's context window)
    and a length past the window is refused; the figures on the user's machine follow the modelled table, from the
    ledger's `ledger perf calibrate` fit with its error bars, or a line saying mlir-air's published machine is used
    (handlers.predicting).
    """
    from handlers.predicting import predict_result
    from handlers.queries import curve_result

    host_bytes = int(r.host_memory_gib * 2**30) if r.host_memory_gib else None
    if r.curve:
        value, c = curve_result(vc.app, r.target, switches=r.switches, weights=r.weights, host_bytes=host_bytes,
                                png=r.png, where=vc.here)
        return {"value": value, "curve": c}
    p, value = predict_result(vc.app, r.target, seq=r.seq, ctx=r.ctx, switches=r.switches, weights=r.weights,
                              host_bytes=host_bytes, calibration=r.calibration)
    return {"value": value, "prediction": p}


def _predict_text(v: dict, r: PredictRequest) -> Output:
    from handlers.predicting import calibration_lines
    from handlers.queries import curve_name
    from npu_kernels.perf.curve import render_curve
    from npu_kernels.perf.predict import render_table

    if r.curve:
        return Output().text(render_curve(v["curve"], curve_name(r.target))).out(f"chart: {v['value']['png']}")
    title = Path(r.target).name + ("" if r.weights == "bf16" else f" ({r.weights})")
    out = Output().text(render_table(v["prediction"], title=title))
    for line in calibration_lines(v["value"]["calibration"]):
        out.out(escaped(line))  # a calibration's name and figures come from the ledger
    return out


def _predict_warnings(v: dict, r) -> Output:
    out = Output()
    for problem in ([] if r.curve else v["prediction"].memory["problems"]):
        out.err(f"warning: {problem}")
    return out


def _predict_errors() -> tuple[type[BaseException], ...]:
    from handlers.queries import TargetError

    return (TargetError, ValueError, OSError, KeyError)


def _pair_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _lookup_dims(words: tuple[str, ...], values: dict) -> dict:
    """`registry lookup`'s ARGS: `M K N` (gemm), or `k=v` words (commas allowed), as the dims object the tool
    takes; gemm's M, K and N required."""
    from registry.catalog import canonical_kernel

    from npu_kernels.numerics.kernels import piece

    gemm = bool(piece(canonical_kernel(values["kernel"]), "best_config"))  # GEMM's: M K N from the JSON
    if gemm and len(words) == 3 and all("=" not in a for a in words):
        try:
            M, K, N = (int(a) for a in words)
        except ValueError:
            raise ValueError("M K N must be integers") from None
        return {"M": M, "K": K, "N": N}
    dims = {}
    for word in words:
        for part in word.split(","):
            if "=" not in part:
                raise ValueError(f"expected k=v, got {part!r}")
            k, v = part.split("=", 1)
            dims[k.strip()] = _pair_value(v.strip())
    if gemm and not all(k in dims for k in ("M", "K", "N")):
        raise ValueError("gemm needs M K N (or M=.. K=.. N=..)")
    return dims


DIMS = {"type": "object", "additionalProperties": {"type": ["integer", "boolean"]},
        "description": "named sizes, e.g. {\"M\": 2048, \"K\": 2048, \"N\": 2048}"}


@dataclass(frozen=True)
class LookupRequest:
    kernel: str = arg("KERNEL", TEXT)
    dims: dict = arg("ARGS", {**DIMS, "description": "gemm: {M, K, N}; other kernels: any of their dimensions"},
                     click_type=str, nargs=-1, required=False, parse=_lookup_dims, metavar="[ARGS]...")
    dtype: str = arg("--dtype", {"enum": ["bf16", "f32"], "default": "bf16", "description": "GEMM output dtype"},
                     default="bf16", click_type=str, show_default=True, help="GEMM output dtype: bf16 or f32")
    precision: str | None = arg("--precision", {"enum": ["high", "low"], "description": "GEMM tier (default: the "
                                "tier `plan` takes for the shape)"}, default=None,
                                help="GEMM precision tier (default: the tier `ledger plan` takes for the shape)")
    contract: str | None = arg("--contract", {"enum": sorted(CONTRACTS), "description": "GEMM contract, in place of "
                               "dtype and precision"}, default=None,
                               help="GEMM contract, in place of --dtype and --precision (f32-out, bf16-out-high, "
                                    "bf16-out-low)")
    registry_dir: str | None = arg("--registry-dir", default=None, click_type="dir", cli_only=True,
                                   help="details/ dir holding the GEMM JSON")


def _lookup(vc: VerbCall, r: LookupRequest):
    """`lookup gemm M K N` (the GEMM JSON projected in the workspace, or --registry-dir) or `lookup KERNEL k=v ...`
    (the ledger's rows): (kind, found, dtype, precision) of `handlers.queries.registry_lookup`."""
    from handlers.queries import registry_lookup

    dtype, precision = CONTRACTS[r.contract] if r.contract else (r.dtype, r.precision)
    directory = Path(r.registry_dir) if r.registry_dir else vc.app.workspace / "kernel_registry" / "details"
    kind, found = registry_lookup(r.kernel, r.dims, events=lambda: vc.app.ledger.read_all(), registry_dir=directory,
                                  output_dtype=dtype, precision=precision)
    return kind, found, dtype, precision


def _lookup_text(value, r: LookupRequest) -> Output:
    from registry.fold import not_npu2_mark
    from registry.render_markdown import STATUS_GLYPH, tile_text
    from registry.text import num, sci, shape_args

    kind, found, dtype, precision = value
    out = Output()
    if kind == "best":  # the best measured configuration (GEMM's)
        M, K, N = int(r.dims["M"]), int(r.dims["K"]), int(r.dims["N"])
        herd = f"  herd {'x'.join(map(str, found['herd']))}" if "herd" in found else ""
        return out.out(f"{M}x{K}x{N} out={dtype} {precision or found['precision']}: method {found['method']}  tile "
                       f"{tile_text(found['tile'])}  gflops {num(found['gflops'])}  mean_rel_L1 "
                       f"{sci(found['mean_rel_L1'])}{herd}")
    for row in found:
        b = row.best
        if b is not None and not b.on_hardware:  # never "best": a rehearsal / emulated row is not an NPU2 figure
            what = (f"  no NPU2 row; {not_npu2_mark(b)}: {b.method} tile {tile_text(b.tile)} "
                    f"mean_rel_L1 {sci(b.mean_rel_L1)}")
        else:
            what = (f"  best {b.method} ({b.evidence}) tile {tile_text(b.tile)} {num(b.throughput)} {row.spec.unit} "
                    f"mean_rel_L1 {sci(b.mean_rel_L1)}" if b else "")
        out.out(f"{row.spec.kernel} {shape_args(row.shape)}: {STATUS_GLYPH[row.status]} {row.status}" + what
                + (f"  used by {' + '.join(row.used_by)}" if row.used_by else ""))
    return out


@dataclass(frozen=True)
class NameRequest:
    name: str = arg("NAME", NAME)


def _diagnose(vc: VerbCall, r: NameRequest):
    from handlers import on_demand

    return on_demand.diagnose(vc.app.ledger, vc.app.workspace, r.name)


def _diagnose_text(layers, r) -> Output:
    from npu_kernels.model.compare import isolated_minima

    out = Output().out(f"{'layer':>5} {'cos min':>9} {'p5':>9} {'median':>9} {'mean':>9} {'max_abs':>10} "
                       f"{'mean_abs':>10}")
    for x in layers:
        out.out(f"{x.layer:>5} {x.cos_min:>9.5f} {x.cos_p5:>9.5f} {x.cos_median:>9.5f} {x.cos_mean:>9.5f} "
                f"{x.max_abs:>10.4g} {x.mean_abs:>10.4g}")
    apart = isolated_minima(layers)
    if apart:
        out.out(f"layers {', '.join(map(str, apart))}: the minimum is one position far below the rest (p5); a "
                "massive activation under the floor-rounded residual add does this on the emulated NPU2 "
                "(docs/emulated_numerics.md, \"Massive activations\")")
    return out


@dataclass(frozen=True)
class RunRequest:
    name: str = arg("NAME", NAME)
    prompt: str = arg("--prompt", TEXT)
    n_tokens: int = arg("--n-tokens", {"minimum": 1, "maximum": 4096, "default": 32}, default=32, show_default=True)
    profile: bool = arg("--profile", {"default": False, "description": "per-stage breakdown"}, default=False,
                        help="per-stage breakdown: setup, prefill, decode, LM head, top kernels")


def _run(vc: VerbCall, r: RunRequest):
    from handlers.runs import generate

    return generate(vc.app.ledger, vc.app.workspace, r.name, r.prompt, r.n_tokens, profile=r.profile)


def _run_text(out: dict, r: RunRequest) -> Output:
    text = Output().out(out["text"])
    text.out(f"\nsetup {out['setup_s']:.3f} s (not timed) | TTFT {out['ttft_s'] * 1e3:.1f} ms | "
             f"{out['tokens_per_s'] or 0:.2f} tokens/s | {out['ms_per_token'] or 0:.2f} ms/token | "
             f"{out['n_prompt_tokens']} prompt tokens | {out['source']}")
    if r.profile:
        p = out["profile"]
        decode = p["decode_s_per_token"]
        text.out(f"{'stage':<28}{'seconds':>10}")
        text.out(f"{'setup':<28}{p['setup_s']:>10.4f}")
        text.out(f"{'prefill':<28}{p['prefill_s']:>10.4f}")
        text.out(f"{'decode per token (median)':<28}{(sorted(decode)[len(decode) // 2] if decode else 0):>10.4f}")
        text.out(f"{'LM head (all calls)':<28}{p['lm_head_s']:>10.4f}")
        for k in p["top_kernels"]:
            text.out(f"  kernel {k['kernel']:<19}{k['seconds']:>10.4f}  ({k['calls']} calls)")
    return text


@dataclass(frozen=True)
class VerifyModelRequest:
    name: str = arg("NAME", NAME)
    full: bool = arg("--full", {"default": False, "description": "all 8 prompts"}, default=False, help="all 8 prompts")
    inject: str | None = arg("--inject", {"enum": sorted(FAULTS), "description": "a gate drill: the gate with this "
                             "test fault on, recorded as drill:FAULT"}, default=None, click_type=str, metavar="FAULT",
                             help="a gate drill: the same gate with one test fault switched on ('--inject list' names "
                                  "them); recorded as context drill:FAULT, never as the deployment's evidence")


def _verify_model(vc: VerbCall, r: VerifyModelRequest):
    from handlers import on_demand

    return on_demand.verify_model(vc.app.ledger, vc.app.workspace, r.name, full=r.full, inject=r.inject), r.inject


def _verify_model_text(value, r) -> Output:
    from handlers.narrate import describe
    from npu_kernels.model.compare import token_gate_failure

    gates, inject = value
    out = Output()
    for g in gates:
        out.out(describe("TokenGateChecked", g.to_payload()))
        if not g.passed:
            out.out(f"    why: {token_gate_failure(g)}")
    caught = sum(1 for g in gates if not g.passed)
    if inject:
        caught_first = sum(1 for g in gates if g.first_divergence_passed is False)
        return out.out(f"[drill] {inject}: the gate failed {caught}/{len(gates)} prompts "
                       f"(first divergence alone {caught_first}/{len(gates)})")
    return out.out(f"[verify] {'PASS' if all(g.passed for g in gates) else 'FAIL'}")


def _verify_model_exit(value) -> int:
    """A drill: 1 when some prompt passed (the gate missed the fault); else 1 when the gate failed."""
    gates, inject = value
    caught = sum(1 for g in gates if not g.passed)
    return int(caught < len(gates)) if inject else int(caught > 0)


def _fault_list(r: VerifyModelRequest) -> Output | None:
    if r.inject != "list":
        return None
    out = Output()
    for fault in sorted(FAULTS):
        out.out(f"{fault:<26} {FAULT_HELP[fault]}")
    return out


def _unknown_fault() -> tuple[tuple[type[BaseException], str], ...]:
    from handlers.on_demand import UnknownFault

    return ((UnknownFault, "--inject"),)


@dataclass(frozen=True)
class OptimiseRequest:
    name: str = arg("NAME", NAME)
    what: str = arg("--what", {**TEXT, "description": "what the engineer changed"},
                    help="what the engineer changed (recorded as the optimisation)")
    phase: int = arg("--phase", {"enum": [4, 5]}, default=4, click_type=("4", "5"), cli_default="4",
                     show_default=True, parse=lambda text, _: int(text))


def _optimise(vc: VerbCall, r: OptimiseRequest):
    from handlers.runs import optimise

    return rw.optimise_json(optimise(vc.app.ledger, vc.app.workspace, r.name, r.what, r.phase))


def _optimise_text(out: dict, r: OptimiseRequest) -> Output:
    ok = "kept" if out["gate_passed"] else "broken"
    return Output().out(f"{r.what}: {out['outcome']} ({out['before_s']:.6g} -> {out['after_s']:.6g} s, token gate "
                        f"{ok})")


@dataclass(frozen=True)
class ReverifyRequest:
    all: bool = arg("--all", {"default": True, "enum": [True], "description": "every deployed model (the only "
                    "mode)"}, default=True, required=True, help="every deployed model (the only mode today)")
    executor: str | None = arg("--executor", {"enum": list(DEPLOYMENT_EXECUTORS)}, default=None,
                               help="re-run on this executor (default: each deployment's own)")
    standin_fault: str | None = arg("--standin-fault", default=None, click_type=str, cli_only=True, hidden=True,
                                    metavar="KERNEL[:k=v,...]",
                                    help="test seam: the emulated stand-in harness of the matching rows fails "
                                         "(npu_kernels.numerics.executors.standin)")


def _reverify(vc: VerbCall, r: ReverifyRequest):
    from handlers.reverify import reverify_all

    return reverify_all(vc.app.ledger, workspace=vc.app.workspace, executor=r.executor,
                        standin_fault=r.standin_fault)


def _reverify_text(found, r) -> Output:
    from handlers.reverify import render_table

    return Output().out(render_table(found))


def _triage_input(path: str, what: str) -> str:
    from handlers.inputs import InputError, read_input_text

    try:  # "-" is stdin; a regular file under its cap, read with a bound (handlers.inputs)
        return read_input_text(path, what)
    except InputError as e:
        raise Exit(f"triage: {e}") from None


def _triage_evidence(path: str, values: dict) -> dict:
    try:
        evidence = json.loads(_triage_input(path, "evidence"))
    except json.JSONDecodeError as e:
        raise Exit(f"triage: evidence {path!r} is not JSON: {e.msg} (line {e.lineno})") from None
    if not isinstance(evidence, dict):
        raise Exit(f"triage: evidence {path!r} must be a JSON object")
    return evidence


@dataclass(frozen=True)
class TriageRequest:
    text: str = arg("FILE|-", {"description": "compiler / runtime output to match"}, metavar="FILE|-",
                    parse=lambda path, _: _triage_input(path, "log"))  # the CLI reads the file (or stdin)
    evidence: dict | None = arg("--evidence", {"type": "object", "description": "gate evidence (keys: "
                                "handlers/triage/evidence.py)"}, default=None, click_type=str, metavar="JSON",
                                parse=_triage_evidence,
                                help="Gate evidence, a JSON object (keys: see handlers/triage/evidence.py).")
    rules: str | None = arg("--rules", default=None, click_type=str, metavar="TOML", cli_only=True,
                            help="A rules file instead of the built-in one.")


def _triage(vc: VerbCall, r: TriageRequest):
    """The playbook rules that match, best first. The CLI: with --rules' file, each match's registry checks
    (`check_fixes` against the workspace's registry); the tool: the built-in rules, no registry checks, its text
    and evidence bounded as the CLI's files are."""
    from handlers.inputs import bounded_text
    from handlers.triage import RuleError, load_rules, triage_evidence

    evidence = r.evidence or {}
    if vc.face == "mcp":
        bounded_text(json.dumps(evidence), "evidence")
        return triage_evidence(evidence, bounded_text(r.text, "log"))
    from handlers.planning import workspace_registry
    from handlers.triage.registry_check import check_fixes

    try:
        rules = load_rules(r.rules)
    except RuleError as e:
        raise Exit(f"triage: {e}") from None
    return check_fixes(triage_evidence(evidence, r.text, rules=rules), evidence, workspace_registry(vc.app))


NO_MATCH = "No known failure pattern matches."
NO_MATCH_EXIT = 2  # the log is a failure no playbook names: a script can tell (1: an input cannot be read)


def _triage_text(matches, r) -> Output:
    """The best match in full and any other rule that also fired on one line each; the log's lines escaped."""
    import textwrap

    if not matches:
        return Output().out(NO_MATCH)
    out: list[str] = []
    wrap = textwrap.TextWrapper(width=100, initial_indent="     ", subsequent_indent="     ")
    for m in matches[:1]:
        limit = ", known hardware/compiler limit" if m.known_limit else ""
        out.append(f"best match: {m.rule_id}: {m.title} (confidence {m.confidence:.2f}{limit})")
        out.append(f"   source: {m.source}")
        for label, body in (("root cause", m.root_cause), ("check", m.check), ("remedy", m.remedy)):
            out.append(f"   {label}:")
            out.append(wrap.fill(" ".join(body.split())))
        if m.matched_lines:
            out.append("   matched lines:")
            out.extend(f"     | {line}" for line in m.matched_lines)
        if m.matched_facts:
            out.append("   matched facts:")
            out.extend(f"     - {fact}" for fact in m.matched_facts)
        if m.fix_checks:
            out.append("   registry:")
            out.extend(f"     - {c}" for c in m.fix_checks)
        out.append("")
    if matches[1:]:
        out.append("also fired (less likely, or the same evidence and listed later in the playbooks; `--json` has them "
                   "in full):")
        out.extend(f"  - {m.rule_id}: {m.title} (confidence {m.confidence:.2f})" for m in matches[1:])
    text = "\n".join(out).rstrip()
    return Output().out("\n".join(escaped(line) for line in text.split("\n")))  # the log's lines: no escape runs


def _pairs(text: str, what: str, strings: bool = False) -> dict:
    """"M=2048,K=2048,causal=true" -> {"M": 2048, "K": 2048, "causal": True}; other words only if `strings`."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise CliError(f"bad {what} item {part!r}: expected key=value (e.g. M=2048)")
        low = value.lower()
        if low in ("true", "false"):
            out[key] = low == "true"
        else:
            try:
                out[key] = int(value)
            except ValueError:
                if not strings:
                    raise CliError(f"bad {what} item {part!r}: {value!r} is not an integer or true/false") from None
                out[key] = value
    if not out:
        raise CliError(f"empty {what}: expected key=value pairs separated by commas")
    return out


def _kernel_shape(text: str, values: dict) -> dict:
    """`--shape M=..,K=..` as the tool's object, after the kernel's name is known (as the CLI always checked)."""
    from npu_kernels.numerics.catalog import get_spec
    from npu_kernels.numerics.spec import UnknownKernel

    try:
        get_spec(values["kernel"])
    except UnknownKernel as e:
        raise CliError(str(e)) from None
    return _pairs(text, "shape")


TARGET = {"type": "string", "enum": ["npu2", "npu1"]}


@dataclass(frozen=True)
class KernelRunRequest:
    kernel: str = arg("KERNEL", TEXT)
    shape: dict = arg("--shape", DIMS, click_type=str, parse=_kernel_shape, help="named sizes, e.g. M=2048,K=2048,N=2048")
    executor: str = arg("--executor", {"enum": list(EXECUTOR_NAMES)}, default="emulated", show_default=True,
                        help="mlir-air: run mlir-air's own harness (MLIR_AIR_DIR, under the NPU lock)")
    target: str = arg("--target", TARGET, default="npu2", show_default=True)
    contract: str | None = arg("--contract", {"description": "e.g. f32-out | bf16-out-high | bf16-out-low (gemm)"},
                               default=None, click_type=str, help="e.g. f32-out | bf16-out-high | bf16-out-low (gemm)")
    tile: dict | None = arg("--tile", {"type": "object", "additionalProperties": {"type": ["integer", "boolean",
                            "string"]}, "description": "tile overrides, e.g. {\"tile_m\": 64, \"tile_n\": 128}"},
                            default=None, click_type=str, parse=lambda text, _: _pairs(text, "tile", strings=True),
                            help="tile overrides, e.g. tile_m=64,tile_n=128")
    force_tile: bool = arg("--force-tile", default=False, cli_only=True,
                           help="run an illegal tile anyway (fault injection)")
    seed: int = arg("--seed", default=0, show_default=True, click_type=int)
    inputs: str = arg("--inputs", {"enum": ["project", "harness"], "default": "project", "description": "harness: "
                      "mlir-air's harness inputs and reference (its [precision] line)"}, default="project",
                      show_default=True, help="project: the project's fixed-seed inputs; harness: mlir-air's harness "
                                              "inputs and reference")


def _kernel_run(vc: VerbCall, r: KernelRunRequest):
    """One leaf kernel at one shape on the executor's kernel runner, judged against FP32 (records nothing):
    {"result": the KernelResult, "harness": whether mlir-air's harness ran it, "registry": the workspace's
    planning registry, read for the text's NPU2 comparison only}."""
    from handlers.planning import workspace_registry
    from npu_kernels.backends.kernel_runners import make_runner
    from npu_kernels.backends.runner_base import KernelRow

    row = KernelRow(r.kernel, r.shape, contract=r.contract, tile=r.tile, force_tile=r.force_tile)
    runner = make_runner(r.executor, r.target)
    result = runner.measure(row, seed=r.seed, inputs=r.inputs)
    return {"result": result, "harness": runner.source == "harness", "registry": lambda: workspace_registry(vc.app)}


def _kernel_errors() -> tuple[type[BaseException], ...]:
    from npu_kernels.mlir_air.output import TranscriptError
    from npu_kernels.mlir_air.table import HarnessError
    from npu_kernels.numerics.harness_inputs import HarnessNotReproduced
    from npu_kernels.numerics.spec import ShapeError, UnknownKernel
    from npu_kernels.numerics.tiles import TileRuleViolation

    return (UnknownKernel, HarnessNotReproduced, HarnessError, TranscriptError, ShapeError, TileRuleViolation,
            ValueError)


def _kernel_error_text(e: BaseException) -> str:
    """mlir-air's harness (no command, no lock, a timeout, an unreadable run) and an unknown contract / target: the
    first line; the others whole."""
    from npu_kernels.mlir_air.output import TranscriptError
    from npu_kernels.mlir_air.table import HarnessError
    from npu_kernels.numerics.harness_inputs import HarnessNotReproduced
    from npu_kernels.numerics.spec import ShapeError, UnknownKernel
    from npu_kernels.numerics.tiles import TileRuleViolation

    if isinstance(e, (UnknownKernel, HarnessNotReproduced)):
        return str(e)
    if isinstance(e, (HarnessError, TranscriptError)):
        return str(e).splitlines()[0]
    if isinstance(e, (ShapeError, TileRuleViolation)):
        return str(e)
    return str(e).splitlines()[0]


def _fmt(x, spec: str = ".3e") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


def npu2_comparison(kernel: str, shape: dict, contract: str, spec, registry) -> str:
    """The "NPU2 measured" figure a run is compared with: the registry's row for this exact shape and contract
    when one is measured on NPU2 (the ledger's rows, imported or hardware, and MLIR_AIR_DIR's GEMM JSON, through
    registry.lookup), with its cite; else the catalog's figure, saying it was measured at another shape."""
    from registry.catalog import shape_key
    from registry.fold import HARDWARE
    from registry.lookup import gemm_answer, kernel_rows
    from registry.render_json import GEMM_JSON
    from registry.text import shape_args

    c = spec.contract(contract)
    from npu_kernels.numerics.kernels import piece

    best_config = piece(kernel, "best_config")  # GEMM's: the registry's best measured configuration
    if best_config and c.out_dtype == "bf16" and c.tier:
        M, K, N = (int(shape[k]) for k in ("M", "K", "N"))
        choice = registry.best(kernel, {"M": M, "K": K, "N": N}, c.tier)  # the row planning follows, cited
        for _, doc in registry.documents if choice is not None else ():
            try:
                a = gemm_answer(doc, GEMM_JSON["bf16"], M, K, N, "bf16", c.tier)
            except KeyError:
                continue
            if a["method"] == choice.method and a.get("mean_rel_L1") is not None:
                return f"NPU2 measured {a['mean_rel_L1']:.1e} at this exact shape: {choice.cite}"
    elif not best_config:
        try:
            rows = kernel_rows(kernel, registry.data, **shape)
        except (KeyError, ValueError):
            rows = []
        for row in rows:
            ms = [m for m in row.measurements if m.evidence in HARDWARE and m.contract == c.name
                  and m.verdict == "PASS" and m.mean_rel_L1 is not None]
            if ms and dict(row.shape) == dict(shape_key(row.spec, shape)):
                m = ms[-1]
                return (f"NPU2 measured {m.mean_rel_L1:.1e} at this exact shape: ledger seq {m.seq}: {kernel} "
                        f"{shape_args(row.shape)} {m.method} ({m.evidence})")
    npu2 = spec.npu2_figure(contract)
    if npu2 is None:
        return "NPU2: not measured (no registry row of this shape, no published figure of this kernel)"
    return (f"NPU2 measured {npu2.mean_rel_L1:.1e} at {npu2.at}: the catalog's figure at another shape "
            f"(no NPU2 row of {kernel} {shape_args(tuple(shape.items()))} in the registry)")


def _kernel_run_text(v: dict, req: KernelRunRequest) -> Output:
    from npu_kernels.numerics.catalog import get_spec

    r, harness = v["result"], v["harness"]
    shape = ",".join(f"{k}={val}" for k, val in r.shape.items())
    comparison = npu2_comparison(r.kernel, dict(r.shape), r.contract, get_spec(req.kernel), v["registry"]())
    rows = [
        ("kernel", f"{r.kernel} {shape}"),
        ("contract", f"{r.contract}  (rtol {r.rtol:g}, atol {r.atol:g})"),
        ("executor", f"{r.executor} / {r.target}"),
        ("verdict", f"{r.verdict}  ({r.mismatches} of {r.n_elements} elements outside, {r.nan_count} NaN)"),
        ("mean_rel_L1", f"{_fmt(r.mean_rel_L1)}  ({comparison})"),
        ("max_abs / max_rel", f"{_fmt(r.max_abs)} / {_fmt(r.max_rel)}"),
        *_time_rows(r, harness),
        ("tile", " ".join(f"{k}={val}" for k, val in r.tile.items())),
        ("tiles", f"{r.tiles_in_flight} of {r.tiles_target} (herd {'x'.join(map(str, r.herd or []))})"
         + (f": {r.tile_justification}" if r.tile_justification else "")),
    ]
    rows += [("warning", w) for w in r.warnings]
    width = max(len(k) for k, _ in rows)
    out = Output()
    for k, val in rows:
        out.out(f"{k:<{width}}  {val}")
    return out


def _time_rows(r, harness: bool) -> list[tuple[str, str]]:
    """The timing rows, each saying where its figure comes from (issue #24: never unlabelled); `harness`: the
    run was mlir-air's harness (its printed figures), else an in-process executor's kernel call."""
    from npu_kernels.backends.kernel_runners import figure_source
    from npu_kernels.provenance import LABELS

    if not harness:
        return [("time", f"{r.seconds * 1e3:.2f} ms wall, {figure_source(r.executor)}"
                 + (f"  ({r.gflops:.1f} GFLOP/s on the CPU emulator)" if r.gflops else ""))]
    npu = LABELS[r.provenance_class] if r.provenance_class else figure_source(r.executor)  # what this run ran in
    rows = [("time", f"{r.seconds * 1e3:.2f} ms wall of the harness run (host clock: compile + run)")]
    if r.gflops:
        rows.append(("throughput", f"{r.gflops:.1f} GFLOP/s ({npu})"))
    return rows


# a quoted line of the file inside a transcript error: Python's repr of a str (the verdicts it names are kept)
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_KEPT = ("'PASS!'", "'failed.'")


def withheld(message: str) -> str:
    """`message` with every quoted excerpt of the file replaced by `<line withheld>`."""
    return _QUOTED.sub(lambda m: m.group(0) if m.group(0) in _KEPT else "<line withheld>", message)


@dataclass(frozen=True, kw_only=True)  # the tool's order: a required field after fields with defaults
class RecordHarnessRequest:
    name: str = arg("NAME", NAME)
    kernel: str = arg("--kernel", TEXT)
    shape: str = arg("--shape", {**TEXT, "description": "e.g. M=2048,K=2048,N=2048"}, help="e.g. M=2048,K=2048,N=2048")
    contract: str | None = arg("--contract", TEXT, default=None)
    role: str = arg("--role", default="")
    transcript_path: str = arg("--file", {**TEXT, "description": "the `make run` transcript file (read and "
                               "validated)"}, click_type="file or -", path="transcript")
    method: str = arg("--method", {"default": "", "description": "GEMM (required): the make run's METHOD, the name "
                      "mlir-air's registry files the row under (bf16-out-high: fused-cast / drain; bf16-out-low: "
                      "direct; f32-out: external / direct)"}, default="",
                      help="GEMM (required): the METHOD the make run used, the name mlir-air's registry files the row "
                           "under (bf16-out-high: fused-cast / drain; bf16-out-low: direct; f32-out: external / direct)")
    device: str | None = arg("--device", {**TEXT, "description": "the NPU the transcript ran on (without it and "
                             "toolchain: unattested)"}, default=None,
                             help="the NPU the transcript ran on, as xrt-smi names it (e.g. 'NPU Strix')")
    toolchain: str | None = arg("--toolchain", {**TEXT, "description": "mlir_air_commit=SHA,aie_opt=...,air_opt=...,"
                                "xrt_smi=...,peano=..."}, default=None,
                                help="what it ran on: mlir_air_commit=SHA,aie_opt=...,air_opt=...,xrt_smi=...,peano=...")


def _record_harness(vc: VerbCall, r: RecordHarnessRequest):
    """(seq, the KernelVerified) of a `make run` transcript (a regular file, or stdin `-` on the CLI, under its
    cap) validated as `handlers.record.record_harness` validates it. The tool's transcript error names the file
    and withholds its quoted lines: an agent sees why, not what the file holds."""
    from handlers.inputs import read_input_text
    from handlers.record import parse_toolchain, record_harness
    from npu_kernels.mlir_air.output import TranscriptError

    path = r.transcript_path
    text = read_input_text(path, "transcript")
    label = "<stdin>" if path == "-" and vc.face == "cli" else Path(path).name
    try:
        return record_harness(vc.app.ledger, r.name, kernel=r.kernel, shape=r.shape, contract=r.contract, text=text,
                              file_label=label, role=r.role, device=r.device, toolchain=parse_toolchain(r.toolchain),
                              method=r.method or "")
    except TranscriptError as e:
        if vc.face == "cli":
            raise
        raise TranscriptError(f"{label}: {withheld(str(e))}") from None


def _record_harness_text(value, r: RecordHarnessRequest) -> Output:
    seq, event = value
    return Output().out(f"{r.kernel} {r.shape}: {event.verdict} recorded at seq {seq} as {event.provenance_class} "
                        f"(sha256 {event.provenance['output_sha256'][:12]})")


@dataclass(frozen=True)
class AuditRequest:
    name: str = arg("NAME", NAME)
    against: str | None = arg("--against", {**TEXT, "description": "a checkpoint SIZE:HASH kept elsewhere"},
                              default=None, click_type=str,
                              help="a checkpoint SIZE:HASH kept elsewhere (detects truncation/rewrite)")


def _audit(vc: VerbCall, r: AuditRequest):
    """(the evaluation report, the workspace its page lies in)."""
    return deploy.audit(vc.app.ledger, r.name, workspace=vc.app.workspace, checkpoint=r.against), vc.app.workspace


def _audit_text(value, r: AuditRequest) -> Output:
    from registry.model_docs import model_dir_name

    report, workspace = value
    out = Output()
    for f in report.findings:
        where = f"seq {f['seq']}" if f.get("seq") is not None else "—"
        out.out(f"  [{f['severity']}] {where}: {f['check']}: {f['message']}")
    out.out(f"{shown(r.name)}: evaluation {report.verdict} ({len(report.findings)} findings); status {report.status}")
    if report.recorded:
        return out.out(f"report: {workspace / 'llms' / model_dir_name(r.name) / 'docs' / 'evaluation_report.md'}")
    return out.out(f"{report.not_recorded_because}: nothing was recorded")


@dataclass(frozen=True)
class InitRequest:
    model: str = arg("MODEL", {**TEXT, "description": "a local HF folder or a config.json (a Q4NX bundle with base)"},
                     click_type="path", path="model")
    name: str | None = arg("--name", {**TEXT, "description": "deployment name (default: the folder name)"},
                           default=None, click_type=str,
                           help="deployment name (default: the folder name, lower-cased, non-alphanumerics to _)")
    target: str = arg("--target", TARGET, default="npu2", show_default=True)
    dtype: str | None = arg("--dtype", {"enum": ["bf16", "q4nx"], "default": "bf16", "description": "q4nx: model is a "
                            "Q4NX bundle, base its bf16 HF folder"}, default="bf16", cli_default=None,
                            click_type=("bf16", "fp16", "q4nx"),
                            help="bf16 (default), q4nx (MODEL is a Q4NX bundle; the default with --base); fp16 is "
                                 "refused")
    base: str | None = arg("--base", {**TEXT, "description": "with a Q4NX bundle: the bf16 HF folder giving its config "
                           "and tokenizer"}, default=None, click_type="existing dir", path="base folder",
                           help="with a Q4NX bundle as MODEL: the bf16 HF folder giving its config and tokenizer")
    q4nx_style: str = arg("--q4nx-style", {"enum": ["host", "device"], "default": "host", "description": "with base: "
                          "host (dequantised at load) or device (4-bit decode GEMVs, fused decode)"}, default="host",
                          show_default=True, help="with --base: host (dequantised at load, the bf16 pipeline) or device "
                          "(4-bit decode GEMVs on the NPU, fused one-dispatch decode)")
    executor: str = arg("--executor", {"enum": list(DEPLOYMENT_EXECUTORS)}, default="emulated", show_default=True)
    drafter: str | None = arg("--drafter", default=None, click_type="path", cli_only=True,
                              help="a smaller HF folder with MODEL's tokenizer: Phase 5 accepts speculative decoding "
                                   "with it only if its greedy tokens equal those without it on every gate prompt")
    draft_block: int = arg("--draft-block", default=DEFAULT_BLOCK, click_type=int, show_default=True, cli_only=True,
                           help="with --drafter: tokens drafted per round (a verify pass checks one more)")


def _init(vc: VerbCall, r: InitRequest):
    """{"created", "dtype", and on the CLI "notes" and "memory"}: the deployment recorded (`deploy.init`), then the
    registry and its docs (`post_commit`). The CLI's dtype defaults to q4nx with --base (an unset --dtype); the
    tool's is q4nx whenever base is given. Out of scope: the CLI's `rejected: ...`, exit 3."""
    if vc.face == "cli":
        dtype = r.dtype or ("q4nx" if r.base else "bf16")
    else:
        dtype = "q4nx" if r.base else r.dtype
    try:
        created = deploy.init(vc.app.ledger, r.model, name=r.name, target=r.target, dtype=dtype, executor=r.executor,
                              workspace=vc.app.workspace, base=r.base, q4nx_style=r.q4nx_style, drafter=r.drafter,
                              draft_block=r.draft_block)
    except deploy.OutOfScope as e:
        if vc.face == "cli":
            raise Exit(f"rejected: {e}", 3) from None
        raise
    value = {"created": created, "dtype": dtype}
    if vc.face == "cli":  # the lines the CLI prints, read after the commit
        from handlers.queries import deployment_config
        from npu_kernels.model.host_memory import (available_memory_bytes, machine_memory_bytes, memory_line,
                                                   memory_need)

        value["notes"] = list(deployment_config(vc.app.ledger, created).arch.notes)  # e.g. a multimodal's decoder
        value["memory"] = memory_line(memory_need(deployment_config(vc.app.ledger, created), r.executor),
                                      machine_memory_bytes(), available_memory_bytes())
    post_commit(vc, created)  # the registry and the new deployment's docs
    return value


def _init_json(v: dict, r: InitRequest):
    out = results.init_json(v["created"], r.executor, r.target, v["dtype"])
    return {**out, "notes": v["notes"]} if "notes" in v else out


def _init_text(v: dict, r: InitRequest) -> Output:
    from handlers.workbench import next_steps

    return Output().out("\n".join([v["memory"], f"deployment {shown(v['created'])} recorded ({r.executor}/{r.target}, "
                                  f"{v['dtype']}); next: {next_steps(v['created'], r.executor)}",
                                  *(f"note: {escaped(n)}" for n in v["notes"])]))


def verdict_lines(name: str, r: dict) -> Output:
    """One phase's verdict as `ledger advance` prints it (a failure on stderr, with the blocker it raised)."""
    if r["passed"]:
        return Output().out(escaped(f"phase {r['phase']} PASSED (attempt {r['attempt']}): {r['summary']}"))
    out = Output()
    if r.get("inconclusive"):  # no verdict: its device run timed out on every try (neither a pass nor a failure)
        out.err(escaped(f"phase {r['phase']} INCONCLUSIVE (attempt {r['attempt']}, {r['tries']} tries): "
                        f"{'; '.join(r['reasons'])}"))
    else:
        out.err(escaped(f"phase {r['phase']} FAILED (attempt {r['attempt']}): {'; '.join(r['reasons'])}"))
    if r.get("blocked"):
        out.err(f"blocker raised: {shown(name)} needs human review; after a fix: "
                f"{ledger_command('resume', name, '--note', '...')}")
    return out


@dataclass(frozen=True)
class AdvanceArgs:
    name: str = arg("NAME", NAME)
    until: int | None = arg("--until", {"minimum": 0, "maximum": 7, "description": "stop after this phase"},
                            default=None, help="stop after this phase (0-7)")
    full: bool = arg("--full", {"default": False, "description": "token gate on all 8 prompts instead of 2"},
                     default=False, help="token gate on all 8 prompts instead of 2")
    prefill_len: int | None = arg("--prefill-len", {"minimum": 8, "maximum": 8192, "description": "prompt length of "
                                  "the Phases 4-5 emulator wall-time runs"}, default=None,
                                  help="prompt length of the Phases 4-5 emulator wall-time runs (information only; "
                                       "default the canonical prompt, which Phase 6 times)")
    distribute: bool = arg("--distribute", default=False, cli_only=True,
                           help="Phase 1 rows as jobs for `ledger worker` hosts (PostgreSQL ledger); judged when all "
                                "are in")
    wait_s: float | None = arg("--wait", {"minimum": 0}, default=None, cli_only=True,
                               help="with --distribute: give up watching after this many seconds (the jobs go on)")


def _advance(vc: VerbCall, r: AdvanceArgs):
    """(the advance report, the verdicts the CLI printed as each phase was judged: a Ctrl-C later leaves them on the
    terminal). The refusal (no usable mlir-air checkout) is judged on advance's own fold, before any attempt is
    opened. --distribute: Phase 1 rows as jobs for the workers (imported here: they need psycopg + procrastinate,
    which the CLI starts without)."""
    from handlers.doctor import advance_refusal
    from handlers.gates import GateOptions

    shown_now: list[dict] = []

    def on_verdict(v: dict) -> None:
        shown_now.append(v)
        for line, err in verdict_lines(r.name, v).lines:
            vc.tell(line, err)

    request = deploy.AdvanceRequest(r.name, vc.app.workspace, until=r.until,
                                    options=GateOptions(full=r.full, prefill_len=r.prefill_len),
                                    preflight=lambda state: advance_refusal(state, r.name),
                                    on_verdict=on_verdict if vc.face == "cli" and not vc.json else None)
    if r.distribute:
        from handlers.workers.coordinator import advance_distributed

        return advance_distributed(vc.app.ledger, request, wait_s=r.wait_s), shown_now
    vc.unit = DeploymentUnit(vc.app.ledger, r.name)  # NAME's docs from the view it folds (not the distributed path's)
    return deploy.advance(vc.app.ledger, request, vc.unit), shown_now


def _advance_text(value, r: AdvanceArgs) -> Output:
    report, shown_now = value
    out = Output()
    for v in report.ran:
        if not any(v is p for p in shown_now):  # the distributed path reports its verdicts at the end
            out.lines.extend(verdict_lines(r.name, v).lines)
    if report.stopped:
        out.out(report.stopped)
    return out.out(f"{shown(r.name)}: {report.status}")


VERBS: list[Verb] = [
    Verb("resume", ResumeRequest, _resume,
         help="Record a human's fix after a blocker; allows one more attempt.",
         description="After a blocker, record what the human fixed; allows one more attempt (`ledger resume`).",
         render=lambda res, r: Output().out(f"{shown(r.name)} resumed; next: {ledger_command('advance', r.name)}"),
         writes="DeploymentResumed with a non-empty note, only while a blocker is active; no verdict", post="after"),
    Verb("lesson", LessonRequest, _lesson, help="Record a lesson learned for NAME.",
         description="Record a lesson learned for NAME (`ledger lesson`).",
         render=lambda res, r: Output().out(f"lesson recorded at seq {res['seq']}"),
         writes="LessonRecorded (text for the LESSONS page; no gate reads it)", post="after"),
    Verb("status", StatusRequest, _status,
         help="Every deployment (or NAME) with its phase, last verdict, blockers and triage.",
         description="Every deployment (or NAME) with its phase, last verdict, blockers and triage "
                     "(`ledger status --json`).",
         render=_status_text, reads=True, json_indent=1,
         exit=lambda res: int(any(row["status"] == "unreplayable" for row in _status_rows(res)))),
    Verb("history", HistoryRequest, _history, help="NAME's events as a readable timeline.",
         description="NAME's events as a timeline, oldest first (`ledger history NAME --json`).",
         render=_history_text, reads=True, json_indent=1),
    Verb("graph", NoRequest, _graph,
         help="Print the lifecycle as a Mermaid diagram (generated from the transitions table).",
         description="The lifecycle as a Mermaid state diagram (`ledger graph --json`).",
         render=lambda res, r: Output().out(res["mermaid"]), json_help='{"mermaid": TEXT}'),
    Verb("head", NoRequest, _head,
         help="Print a checkpoint SIZE:HASH of the ledger (keep it elsewhere; `verify --against` checks it).",
         description="A checkpoint SIZE:HASH of the ledger to keep elsewhere (`ledger head --json`).",
         render=lambda res, r: Output().out(f"{res['size']}:{res['hash']}"), reads=True),
    Verb("log", LogRequest, _log, help="Print the ledger's events in global order.",
         description="The ledger's events in global order, or one stream's (`ledger log --json`).",
         render=_log_text, reads=True, json_indent=1, json_help="one JSON array of events"),
]
VERBS.append(Verb(
    "perf calibrate", CalibrateRequest, _calibrate,
    help="Fit the NPU2 model's per-machine constants (NPU time, BO write / read bandwidth, XRT call cost, host time) "
         "to the ledger's NPU2-measured profile figures and record the fit with its data; `ledger predict` then "
         "reports on this machine with leave-one-out error bars. With no such figures: says so, records nothing, "
         "exit 1.",
    description="Fit the NPU2 model's per-machine constants to the ledger's NPU2-measured profile runs "
                "(`ledger perf calibrate --json`); predict then reports on this machine with error bars.",
    render=_calibrate_text, writes="PerformanceCalibrated (stream perf:calibration): the fit and the data it was "
    "fitted to", json_sort_keys=True, json_help="print the recorded fit as JSON"))
VERBS.append(Verb(
    "twin", TwinRequest, _twin,
    help="Write an mlir-air stand-in (harness Makefiles, verify runner, prompts) into DIRECTORY; point MLIR_AIR_DIR "
         "at it to rehearse the hardware workflow on this machine.",
    description="Write an mlir-air stand-in checkout (harness Makefiles, verify runner) into a folder, to rehearse "
                "the hardware path here (`ledger twin DIR --json`).",
    render=lambda res, r: Output().out(f"mlir-air twin written to {res['dir']}; export {res['export']}"),
    writes="no event: the stand-in's files in `directory`", json_help='{"dir": ..., "export": "MLIR_AIR_DIR=..."}'))
VERBS.append(Verb(
    "doctor", DoctorRequest, _doctor,
    help="Check MLIR_AIR_DIR (default: $MLIR_AIR_DIR) against mlir-air contract CONTRACT_VERSION.",
    description="Check an mlir-air checkout (default $MLIR_AIR_DIR) against the contract the tool was written for "
                "(`ledger doctor --json`); in a twin, which checks read the stand-in's own copies.",
    render=_doctor_text, exit=lambda report: 0 if report["clean"] else 1, json_indent=2,
    json_help="print the findings as JSON"))
VERBS.append(Verb(
    "quantize", QuantizeRequest, _quantize, help="Quantise the bf16 HF FOLDER into a Q4NX bundle at OUT.",
    description="A bf16 HF folder as a Q4NX bundle file (`ledger quantize FOLDER --to q4nx OUT --json`).",
    render=_quantize_text, writes="no event: the bundle file at `out` (inside the workspace or an --allow-dir "
    "folder)", json_sort_keys=True))
VERBS.append(Verb(
    "scaffold", ScaffoldRequest, _scaffold,
    help="Write programming_examples/llms/NAME/ inside MLIR_AIR_DIR (Makefile, verify_adapter.py, NAME_inference.py, "
         "README.md, ARCHITECTURE.md, .gitignore); files the engineer changed are kept.",
    description="NAME's model directory programming_examples/llms/<name>/ in the mlir-air checkout "
                "(`ledger scaffold NAME --json`); files the engineer changed are kept.",
    render=_scaffold_text, writes="no event: the model directory's files in the checkout (the engineer's own changes "
    "kept)", cli_errors=_scaffold_errors(), json_sort_keys=True, json_help="print {dir, written, kept} as JSON"))
VERBS.append(Verb(
    "perf import-history", ImportHistoryRequest, _import_history,
    help="Read one of mlir-air's nightly ndjson files (history / sweep_history / prefill_sweep_history) into the "
         "ledger as imported evidence; a line that is not a row refuses the whole file and records nothing.",
    description="Read one of mlir-air's nightly ndjson files into the ledger as imported evidence "
                "(`ledger perf import-history FILE --json`); a bad line refuses the whole file.",
    render=_import_history_text, writes="NightlyPerfImported per new line, imported:mlir-air-nightly (never an NPU2 "
    "figure of ours)", post="after", post_cli=False, json_sort_keys=True,
    json_help="print what was read and added as JSON"))
VERBS.append(Verb(
    "perf export-history", ExportHistoryRequest, _export_history,
    help="The ledger's Phase 6 / reverify figures measured on NPU2 (runner `npu-ledger/npu2-measured`) and the "
         "imported nightly rows, as lines of mlir-air's nightly history schema.",
    description="The ledger's NPU2-measured Phase 6 figures as mlir-air nightly rows "
                "(`ledger perf export-history --json`).",
    render=lambda lines, r: Output([(x, False) for x in lines]), json=lambda lines, r: rw.export_history_json(lines),
    reads=True, to_file="out",
    to_file_line=lambda lines, r: f"{len(lines)} {NIGHTLY_FILES[r.series]} line(s) written to {r.out}",
    json_help="print the rows as one JSON array instead of ndjson"))
VERBS.append(Verb(
    "registry import", RegistryImportRequest, _registry_import,
    help="Import an mlir-air kernel_registry/ folder as it is (details/*.json and every tested-shapes table, each row's "
         "status kept), or a details/ folder of JSON files, sweep_gemm.py's new-M rows among them (idempotent). Prints "
         "one line per table: rows read, imported, duplicate (a shape another table gave), skipped and why; exits 1 "
         "when a row was skipped and --allow-skip is not given (then nothing is imported).",
    description="Import an mlir-air kernel_registry/ folder as imported evidence, one account per table "
                "(`ledger registry import DIR --json`); a skipped row refuses all unless allow_skip.",
    render=_registry_import_text, json=lambda result, r: rw.registry_import_json(result.accounts),
    writes="KernelVerified rows of registry:import, imported:mlir-air-registry", post="after", post_cli=False,
    cli_errors=(ValueError, FileNotFoundError), cli_fail=_registry_import_fail, json_indent=2,
    json_help="print the per-table accounts as JSON"))
VERBS.append(Verb(
    "registry build", RegistryBuildRequest, _registry_build,
    help="Rebuild the registry and every model's docs from the ledger (or --check them).",
    description="Rebuild (or check) the workspace's projections from the ledger, or add the ledger's new NPU2 rows "
                "to an mlir-air checkout (`ledger registry build [--check] --json`).",
    render=_registry_build_text, json=_registry_build_json, exit=_registry_build_exit, reads=True,
    writes="no event: the projections (rebuilt from the ledger) or the checkout's registry tables",
    json_help="print what was written / found as JSON"))
VERBS.append(Verb(
    "verify", VerifyRequest, _verify,
    help="Walk the hash chain, check the immutability triggers and the events table's definition; exit 2 naming the "
         "first bad seq, and each trigger, constraint, index, column or policy that is not the tool's.\n\n"
         "Every checkpoint this workspace has seen of this ledger (.ledger/checkpoints.json, kept by the ledger's "
         "identity, so a moved or copied workspace keeps them) is checked, and --against too: a ledger emptied, "
         "truncated or rewritten since then is not intact. An intact ledger whose checkpoint cannot be kept (a full "
         "disk, a read-only copy) exits 0 with a warning on stderr.",
    description="Walk the ledger's hash chain and immutability triggers against every kept checkpoint "
                "(`ledger verify --json`); ok=false names the first bad seq.",
    render=_verify_text, json=lambda value, r: results.verify_json(value[0], value[1]), after=_verify_warnings,
    exit=lambda value: 0 if value[0].ok else 2, reads=True))
VERBS.append(Verb(
    "plan", PlanRequest, _plan,
    help="The (kernel, shape, role) list for a deployment NAME or a CONFIG (config.json or HF folder).",
    description="The (kernel, shape, role) rows Phase 1 verifies, with tiles and contracts, for a deployment or a "
                "config.json (`ledger plan --json`).",
    render=_plan_text, json=lambda value, r: results.plan_json(value["rows"]), cli_errors=_target_error(),
    json_indent=1, cli_order=("target", "platform", "as_json", "weights", "seq")))
VERBS.append(Verb(
    "predict", PredictRequest, _predict,
    help="Modelled NPU2 performance of CONFIG (config.json / HF folder) or deployment NAME, and on the machine the "
         "ledger's calibration fitted (`ledger perf calibrate`), with its error bars.",
    description="Modelled NPU2 TTFT, decode tokens/s and per-ELF breakdown of a config or deployment "
                "(`ledger predict --json`).",
    render=_predict_text, json=lambda v, r: v["value"], after=_predict_warnings, cli_errors=_predict_errors(),
    json_sort_keys=True, json_help="one JSON object: ttft_s, decode_tokens_per_s, calls, breakdown",
    cli_order=("target", "as_json", "seq", "ctx", "switches", "host_memory_gib", "curve", "png", "weights",
               "calibration")))
VERBS.append(Verb(
    "registry lookup", LookupRequest, _lookup,
    help="`lookup gemm M K N` (from the GEMM JSON) or `lookup KERNEL k=v ...` (from the ledger).",
    description="The best measured GEMM config for M, K, N, or the registry rows of a kernel "
                "(`ledger registry lookup --json`).",
    render=_lookup_text, json=lambda value, r: results.registry_lookup_json(value[0], value[1]), reads=True,
    cli_errors=(KeyError, ValueError, FileNotFoundError), json_indent=2,
    json_sort_keys=lambda result: isinstance(result, list), json_help="print JSON"))
VERBS.append(Verb(
    "diagnose", NameRequest, _diagnose,
    help="Per-layer cosine of the deployment's pipeline vs HF bf16 (recorded; never fails a phase).",
    description="Per-layer cosine of the deployment's pipeline vs HF bf16 (`ledger diagnose --json`).",
    render=_diagnose_text, json=lambda layers, r: results.diagnose_json(layers),
    writes="LayerDiagnosed measured now (never a verdict)", long=True, progress="text"))
VERBS.append(Verb(
    "run", RunRequest, _run,
    help="Generate with the deployment's integrated runner; prints TTFT and tokens/s (setup not timed).",
    description="Generate with the deployment's integrated runner (`ledger run NAME --json`); records the run's "
                "figures.",
    render=_run_text, json=lambda out, r: rw.run_json(out),
    writes="PerformanceMeasured(phase 6) of the run, measured now (never a verdict)", long=True, progress="text",
    post="recorded", post_cli=False))
VERBS.append(Verb(
    "verify-model", VerifyModelRequest, _verify_model,
    help="The token gate on demand (upstream's `make verify` plus the teacher-forced walk), recorded in the ledger."
         "\n\nWith --inject FAULT it is a drill: the exit status is 0 when the gate failed on every prompt (it caught "
         "the fault), 1 when some prompt passed.",
    description="The token gate on demand, or a gate drill with `inject` (`ledger verify-model --json`); progress "
                "per prompt.",
    render=_verify_model_text, json=lambda value, r: results.verify_model_json(*value), exit=_verify_model_exit,
    writes="TokenGateChecked measured now, context verify-model or drill:FAULT (a drill is never evidence)",
    long=True, progress="text", cli_early=_fault_list, cli_bad=_unknown_fault()))
VERBS.append(Verb(
    "optimise", OptimiseRequest, _optimise,
    help="On hardware: after changing the model directory's code, measure (`make profile`), re-run `make verify` "
         "and record the OptimizationTried against the phase's last measured figure.",
    description="On hardware: measure an engineer's change to the model directory, re-run the token gate and "
                "record it against the phase's last figure (`ledger optimise NAME --what TEXT --json`).",
    render=_optimise_text, writes="the token gate, a PerformanceMeasured and the OptimizationTried, all measured now",
    long=True, progress="always", cli_errors=(ValueError,), json_sort_keys=True,
    json_help="print what was recorded as JSON"))
VERBS.append(Verb(
    "reverify", ReverifyRequest, _reverify,
    help="Re-run every deployed model's token gate and its Phase 1 rows whose toolchain changed; block regressions.",
    description="Re-run every deployed model's token gate and its Phase 1 rows whose toolchain changed; "
                "regressions are blocked (`ledger reverify --all --json`).",
    render=_reverify_text, json=lambda found, r: rw.reverify_json(found),
    exit=lambda found: int(any(x.regressions for x in found)),
    writes="only through the gates' own measurements: TokenGateChecked, KernelVerified re-runs, BlockerRaised on "
           "a regression", long=True, progress="text", post="always", json_indent=1))
VERBS.append(Verb(
    "triage", TriageRequest, _triage,
    help="Match a compiler/runtime log (FILE, or - for stdin) against the known NPU failure playbooks.",
    description="Match compiler/runtime output (and optional gate evidence) against the NPU debugging playbooks; "
                "the matched rules, best first (`ledger triage --json`).",
    render=_triage_text, json=lambda matches, r: results.triage_json(matches), json_indent=2,
    exit=lambda matches: 0 if matches else NO_MATCH_EXIT, json_help="Print the matches as a JSON array, best first.",
    cli_order=("text", "as_json", "evidence", "rules")))
VERBS.append(Verb(
    "kernel run", KernelRunRequest, _kernel_run, help="Run KERNEL at --shape and judge it against its FP32 reference.",
    description="Run one leaf kernel at one shape on an executor and judge its full output against FP32 "
                "(`ledger kernel run --json`); records nothing.",
    render=_kernel_run_text, json=lambda v, r: results.kernel_run_json(v["result"]),
    exit=lambda v: 0 if v["result"].passed else 1, long=True, cli_errors=_kernel_errors(),
    cli_error_text=_kernel_error_text, json_sort_keys=True, json_help="print the result as JSON"))
VERBS.append(Verb(
    "record harness", RecordHarnessRequest, _record_harness,
    help="Record a `make run` transcript from an NPU2 machine as KernelVerified(source=harness).",
    description="Record a `make run` transcript file from an NPU2 machine as the row's evidence, validated as "
                "`ledger record harness` validates it.",
    render=_record_harness_text, json=lambda value, r: results.record_harness_json(*value),
    writes="KernelVerified(source=harness) parsed from the transcript file, validated (shape, element count, "
           "tolerances, physical limits, one transcript per row)", post="after all",
    cli_order=("name", "kernel", "shape", "contract", "transcript_path", "role", "method", "device", "toolchain",
               "as_json")))
VERBS.append(Verb(
    "audit", AuditRequest, _audit,
    help="Phase 7: the independent evaluator (fresh process; reads only the ledger, the workspace's checkpoints and "
         "the model folder). On a read-only ledger it prints its verdict and records nothing.",
    description="Phase 7: the independent evaluator in a fresh process (`ledger audit --json`); at phase7 it runs the "
                "gate, on a deployed model it re-audits.",
    render=_audit_text, json=lambda value, r: results.audit_json(r.name, value[0]),
    exit=lambda value: 1 if value[0].verdict == "FAIL" else 0,
    writes="Phase 7 through its gate, or a re-audit's measured EvaluationRecorded (+ BlockerRaised on FAIL)",
    long=True, progress="text", post="recorded writable", json_indent=1))
VERBS.append(Verb(
    "init", InitRequest, _init,
    help="Start a deployment of MODEL (a local HF folder or a config.json; a Q4NX bundle with --base).",
    description="Start a deployment of a local HF folder / config.json: records the request and the architecture "
                "assessment (`ledger init`).",
    render=_init_text, json=_init_json,
    writes="DeploymentRequested, ArchitectureAssessed and ConfigResolved, all derived from the model's config.json"))
VERBS.append(Verb(
    "advance", AdvanceArgs, _advance, help="Run the next phase gate(s) of NAME, as far as the gates go or up to --until.",
    description="Run the next phase gate(s) of NAME up to `until`; gates cannot be skipped. Progress: one "
                "notification per phase, kernel row and prompt (`ledger advance --json`).",
    render=_advance_text, json=lambda value, r: results.advance_json(value[0]),
    exit=lambda value: 1 if value[0].failed else 0,
    writes="only through the gates: PhaseStarted with the gate's own measured evidence, then the state machine's "
           "PhasePassed / PhaseFailed / PhaseInconclusive (+ BlockerRaised, FailureTriaged)",
    long=True, progress="text", post="recorded"))
BY_NAME: dict[str, Verb] = {v.name: v for v in VERBS}
BY_TOOL: dict[str, Verb] = {v.tool: v for v in VERBS}

# CLI verbs with a tool still written by hand in handlers.cli / handlers.mcp.tools, each with why it is not a row
# (none now: every verb with a tool is a row; tests/unit/test_verbs.py holds the CLI to rows + this + NOT_TOOLS)
NOT_MIGRATED: dict[str, str] = {}

# CLI verbs that have no MCP tool, each with why (every other verb has its tool)
NOT_TOOLS = {
    "db setup": "an administrator's one-time act with superuser rights on the database, never an agent's",
    "mcp": "the server itself",
    "skills export": "writes the agent's own registration (.mcp.json) and skills: a person runs it once",
    "worker": "a long-running process, one per NPU host: not a call that returns",
    "evaluate": "the independent evaluator's hidden fresh process, started by audit / Phase 7 only",
    "kernel list": "a text listing of the kernel catalog without a --json result (no schema yet): a row to add",
}
