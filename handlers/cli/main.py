"""The `ledger` command line. Commands parse arguments, call a handler and map errors to exit codes.

Every failure the user can cause (bad URL, unreachable database, malformed config, garbage transcript,
a gate refused) ends as one `error: ...` line on stderr and a non-zero exit; `-v` adds the traceback.
"""

from __future__ import annotations

import io
import sys
import traceback

import click

from handlers.bootstrap import App, configure_logging
from registry.text import escaped


def show_error(e: click.ClickException) -> None:
    """click's report of `e` (a usage error's usage and help hint first) with its last line as every other error
    of this CLI starts, `error: ` (click writes `Error: `), the message escaped."""
    buffer = io.StringIO()
    e.show(file=buffer)
    lines = buffer.getvalue().rstrip("\n").split("\n")
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("Error: ")), None)
    if last is not None:
        lines[last:] = [f"error: {escaped(chr(10).join(lines[last:])[len('Error: '):])}"]
    click.echo("\n".join(lines), err=True)


class LedgerGroup(click.Group):
    """A click group that turns any uncaught domain error into one clear line and exit status 1, and prints
    click's own errors (a bad option, a `ClickException`) with the same `error: ` start."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as e:
            show_error(e)
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - the CLI boundary: one line, non-zero exit
            app = ctx.obj
            if isinstance(app, App) and app.verbosity:
                traceback.print_exc()
            message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            click.echo(f"error: {escaped(message)}", err=True)
            sys.exit(1)
        finally:
            if isinstance(ctx.obj, App):
                ctx.obj.close()


@click.group(cls=LedgerGroup)
@click.option("--workspace", envvar="LEDGER_HOME", type=click.Path(file_okay=False), help="workspace directory")
@click.option("--db", envvar="LEDGER_DB", help="database URL (sqlite:///PATH or postgresql+psycopg://...)")
@click.option("-v", "--verbose", count=True, help="more logging (-vv for debug)")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None, db: str | None, verbose: int) -> None:
    """npu-ledger: deploy decoder-only LLMs onto AMD NPU2 through recorded phase gates."""
    configure_logging(verbose)
    ctx.obj = App.create(workspace, db, verbose)


@cli.group("db")
def db_group() -> None:
    """The ledger's database (PostgreSQL): roles that keep it immutable."""


@db_group.command("setup")
@click.option("--owner", required=True, help="role that will own the events table (a NOLOGIN role)")
@click.option("--app", "app_role", required=True, help="role the tool logs in as (granted SELECT, INSERT only)")
@click.pass_obj
def db_setup_cmd(app: App, owner: str, app_role: str) -> None:
    """Run once by an administrator (a superuser) on a PostgreSQL ledger: create the events table if needed,
    give it and its trigger function to OWNER, grant APP SELECT and INSERT only (README: PostgreSQL roles)."""

    if app.ledger.dialect != "postgresql":
        raise click.ClickException("`ledger db setup` is for a PostgreSQL ledger (--db postgresql+psycopg://...)")
    try:
        done = setup(app.ledger.engine, owner, app_role)
    except ValueError as e:
        raise click.ClickException(str(e)) from e
    for line in done:
        click.echo(line)
    for line in lift_warnings(app.ledger.engine):
        click.echo(f"warning: {line}", err=True)


# Each command module contributes `commands = [...]`, added here in this order (a static list: a reader and a
# tool can follow it). Imported after `cli` exists; the modules do not import this one.
from handlers.cli import agents as _agent_commands  # noqa: E402
from handlers.cli import deploy as _deploy_commands  # noqa: E402
from handlers.cli import kernels as _kernel_commands  # noqa: E402
from handlers.cli import measure as _measure_commands  # noqa: E402
from handlers.cli import perf as _perf_commands  # noqa: E402
from handlers.cli import registry as _registry_commands  # noqa: E402
from handlers.cli import verbs as _verb_commands  # noqa: E402
from handlers.cli import workers as _worker_commands  # noqa: E402
from ledger.postgres import lift_warnings, setup

for _module in (_verb_commands, _deploy_commands, _measure_commands, _kernel_commands, _registry_commands,
                _worker_commands, _agent_commands,
                _perf_commands):
    for _command in _module.commands:
        cli.add_command(_command)


def main() -> None:
    cli(prog_name="ledger")
