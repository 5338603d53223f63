"""The click commands made from the verb table (`handlers.verbs.VERBS`): one command per row, its arguments and
options from the request's fields, `--json` printing the result, the text mode the row's `render`, the exit
status the row's `exit`. Errors are the group's (handlers.cli.main.LedgerGroup): one `error: ...` line."""

from __future__ import annotations

import dataclasses
import json
import sys
from contextlib import nullcontext
from pathlib import Path

import click

from handlers.bootstrap import App
from handlers.cli.common import cli_call
from handlers.narrate import TerminalProgress, reporting
from handlers.verbs import VERBS, CliError, Exit, Output, Verb, field_type


_PATHS = {"dir": lambda: click.Path(file_okay=False), "existing dir": lambda: click.Path(exists=True, file_okay=False),
          "file": lambda: click.Path(dir_okay=False), "file or -": lambda: click.Path(dir_okay=False, allow_dash=True),
          "path": click.Path}


def _click_type(f: dataclasses.Field):
    """The click type of a request field: its `click_type` (a name in `_PATHS`, or a type), else from its MCP
    property (enum: Choice; integer with bounds: IntRange; number with a minimum: FloatRange), else the
    annotation."""
    if isinstance(f.metadata["click_type"], tuple):
        return click.Choice(list(f.metadata["click_type"]))
    if f.metadata["click_type"] in _PATHS:
        return _PATHS[f.metadata["click_type"]]()
    if f.metadata["click_type"] is not None:
        return f.metadata["click_type"]
    schema, (base, _) = f.metadata["schema"], field_type(f)
    if "enum" in schema:
        return click.Choice(list(schema["enum"]))
    if base is int and ("minimum" in schema or "maximum" in schema):
        return click.IntRange(schema.get("minimum"), schema.get("maximum"))
    if base is float and "minimum" in schema:
        return click.FloatRange(min=schema["minimum"])
    return base


def _refused(sentence: str):
    def callback(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
        if value:
            raise ValueError(sentence)
        return value
    return callback


def _param(f: dataclasses.Field) -> click.Parameter:
    cli, base = f.metadata["cli"], field_type(f)[0]
    has_default = f.default is not dataclasses.MISSING
    if not cli.startswith("-"):  # a positional argument
        nargs = {"nargs": f.metadata["nargs"]} if f.metadata["nargs"] is not None else {}
        required = f.metadata["required"] if f.metadata["required"] is not None else not has_default
        return click.Argument([f.name], required=required, type=_click_type(f), metavar=f.metadata["metavar"],
                              **nargs)
    required = f.metadata["required"] if f.metadata["required"] is not None else not has_default
    if f.metadata["refuse"] is not None:
        return click.Option([cli, f.name], is_flag=True, hidden=True, callback=_refused(f.metadata["refuse"]))
    if base is bool:
        return click.Option([cli, f.name], is_flag=True, help=f.metadata["help"],
                            **({"required": True} if f.metadata["required"] else {}))
    # click: an explicit default=None is a value given; a required option takes none (the tool's default stays)
    default = f.default if f.metadata["cli_default"] is dataclasses.MISSING else f.metadata["cli_default"]
    extra = {"default": default} if has_default and not required else {}
    if f.metadata["metavar"] is not None:
        extra["metavar"] = f.metadata["metavar"]
    return click.Option([cli, f.name], type=_click_type(f), required=required, help=f.metadata["help"],
                        show_default=f.metadata["show_default"], hidden=f.metadata["hidden"], **extra)


class _GivenApp:
    """A command's App made of the mapping a caller passed as click's obj (`{"open_ledger": ..., "workspace":
    ...}`, as `App` answers it too): what the registry commands have always taken, so a test can hand them a
    ledger of its own."""

    def __init__(self, obj) -> None:
        self._open, self.workspace, self.read_only, self._ledger = obj["open_ledger"], Path(obj["workspace"]), False, None

    @property
    def ledger(self):
        if self._ledger is None:
            self._ledger = self._open()
        return self._ledger


def _show(output: Output) -> None:
    for line, to_stderr in output.lines:
        click.echo(line, err=to_stderr)


def command_of(verb: Verb) -> click.Command:
    """The click command of `verb` (its last word; a group's sub-command is added to its group by the caller)."""

    @click.pass_obj
    def callback(app: App, as_json: bool, **values) -> None:
        try:
            run(app, as_json, values)
        except Exit as e:  # the verb's own refusal line, as it is
            click.echo(e.line, err=True)
            sys.exit(e.code)

    def run(app, as_json: bool, values: dict) -> None:
        vc = cli_call(app if isinstance(app, App) or app is None else _GivenApp(app))  # None: a command run alone
        vc.json = as_json
        for f in verb.fields():  # a text form read into its typed value: click's bad parameter when it is not one
            if f.metadata["parse"] is not None and values.get(f.name) is not None:
                try:
                    values[f.name] = f.metadata["parse"](values[f.name], values)
                except CliError as e:
                    raise click.ClickException(str(e)) from None
                except ValueError as e:
                    raise click.BadParameter(str(e), param_hint=f.metadata["cli"]) from e
        request = verb.request(**values)
        early = verb.cli_early(request) if verb.cli_early is not None else None
        if early is not None:
            _show(early)
            return
        bars = verb.progress == "always" or (verb.progress == "text" and not as_json)
        try:
            with reporting(TerminalProgress() if bars else None) if verb.progress else nullcontext():
                value = verb.call(vc, request)
        except tuple(kind for kind, _ in verb.cli_bad) as e:
            raise click.BadParameter(str(e), param_hint=next(o for k, o in verb.cli_bad if isinstance(e, k))) from e
        except (CliError, *verb.cli_errors) as e:
            if verb.cli_fail is not None:
                _show(verb.cli_fail(e, request, as_json))
            text = (verb.cli_error_text(e) if verb.cli_error_text is not None
                    else e.args[0] if isinstance(e, KeyError) and e.args else str(e))
            raise click.ClickException(text) from None
        except Exception as e:
            if verb.cli_fail is not None:
                _show(verb.cli_fail(e, request, as_json))
            raise
        if as_json:
            result = verb.result(value, request)
            sort = verb.json_sort_keys(result) if callable(verb.json_sort_keys) else verb.json_sort_keys
            output = Output().out(json.dumps(result, indent=verb.json_indent, sort_keys=sort, default=str,
                                             allow_nan=True))
        else:
            output = verb.render(value, request)
        into = getattr(request, verb.to_file) if verb.to_file else None
        if into:  # the output's stdout lines into the file, its stderr lines where they go
            Path(into).write_text("".join(line + "\n" for line, err in output.lines if not err), encoding="utf-8")
            _show(Output([(line, err) for line, err in output.lines if err]).out(verb.to_file_line(value, request)))
        else:
            _show(output)
        if verb.after is not None:
            _show(verb.after(value, request))
        code = verb.exit(value)
        if code:
            sys.exit(code)

    params = {f.name: _param(f) for f in verb.fields() if not f.metadata["tool_only"]}
    params["as_json"] = click.Option(["--json", "as_json"], is_flag=True, help=verb.json_help)
    params = [params[name] for name in verb.cli_order or params]
    return click.Command(verb.name.split(" ")[-1], callback=callback, params=params, help=verb.help)


commands = [command_of(v) for v in VERBS if " " not in v.name]


def group_commands(group: str) -> list[click.Command]:
    """The commands of the rows under `group` ("perf": `perf calibrate`), for its module to add to its group."""
    return [command_of(v) for v in VERBS if v.name.split(" ")[0] == group and " " in v.name]
