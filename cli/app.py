"""The Typer app and the console-script entry point.

Every command group lives in its own module with a ``register(app)``
function.  :func:`main` turns :class:`~fabric.errors.FabricError` and usage
errors into one line on stderr and exit status 2, with no traceback.
"""

from __future__ import annotations

import sys

import typer

try:  # typer >= 0.2x vendors click as typer._click; older releases use click itself
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_exc

from cli.flags import on_command
from fabric.errors import ComputeError, FabricError

# rich_markup_mode=None: plain click help, so that `fabric --help` does not import rich (0.25 s of start-up)
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Design the interconnect of AI training clusters: cost, faults, collectives, MFU.")

# Command groups, in `fabric --help` order.  Each module defines register(app).
COMMAND_MODULES = ["cli.build", "cli.cost", "cli.sweep", "cli.report", "cli.view", "cli.faults",
                   "cli.simulate", "cli.mfu", "cli.rl", "cli.orchestrate", "cli.goodput"]


def _register_all() -> None:
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


@app.callback()
def _root(limit: list[str] = typer.Option(
        [], "--limit", metavar="NAME=N",
        help="raise a resource limit for this run (repeatable): gpus, devices, links, flows, samples, memory "
             "(e.g. --limit links=50000000 --limit memory=64GB); also FABRIC_LIMITS=links=5e7,...")) -> None:
    from fabric import limits

    if limit:
        limits.set_limits(limits.parse_limits(limit, base=limits.current()))


_register_all()


def _no_type(ctx=None):
    return None


def tidy_help(command) -> None:
    """Make every command's ``--help`` read as a newcomer expects.

    - a boolean flag shows as a flag (``--json``), not as an option taking a value (``--json <bool>``);
    - an argument shows its name in capitals (``ARCH``, ``SPEC``) in the usage line and the table;
    - an ``ARCH`` argument that ``--topology FILE`` can replace says so, since Typer must list it as optional.
    """
    for sub in getattr(command, "commands", {}).values():
        tidy_help(sub)
    make_help = command.get_help_option

    def help_option(ctx):  # --help is made per context, outside command.params
        opt = make_help(ctx)
        if opt is not None:
            opt.display_type_rich = _no_type
        return opt

    command.get_help_option = help_option
    names = {p.name for p in command.params}
    for param in command.params:
        kind = getattr(param, "param_type_name", "")  # click's own tag: typer may vendor click's classes
        if kind == "option" and getattr(param, "is_flag", False) and not getattr(param, "count", False):
            param.display_type_rich = _no_type  # typer asks the parameter for its type label; a flag has none
        elif kind == "argument":
            if param.metavar is None:
                param.metavar = param.name.upper()
            if param.name == "arch" and "topology" in names and not param.required:
                param.help = (param.help or "architecture") + "; required unless --topology FILE is given"


#: A run of digits longer than this in an error line is a value the user gave (a 400-digit integer in a file):
#: shown cut, so that the line stays one readable line whatever the message quoted.
MAX_DIGITS_SHOWN = 40
#: Longest error line: the longest real message (a list of allowed names) is under 2,000 characters; a value
#: quoted whole (`-p gpu=` and 100,000 characters) is cut in the middle, keeping the field and what is allowed.
MAX_LINE = 4000


def _line(text: str) -> str:
    """An error message as the one line written to stderr: digit runs over MAX_DIGITS_SHOWN cut with '...', and
    a line over MAX_LINE cut in the middle; line breaks inside a quoted value become spaces."""
    import re

    text = re.sub(r"\d{%d,}" % (MAX_DIGITS_SHOWN + 1), lambda m: m.group(0)[:MAX_DIGITS_SHOWN - 3] + "...", text)
    text = " ".join(text.splitlines())
    return text if len(text) <= MAX_LINE else text[:MAX_LINE * 3 // 4] + " ... " + text[-(MAX_LINE // 4):]


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit status (0 ok, 1 a computation failed, 2 bad input)."""
    from cli.validate import install
    from fabric import limits

    command = typer.main.get_command(app)
    install(command)
    tidy_help(command)
    try:
        token = limits.set_limits(limits.current())
    except FabricError as exc:  # a malformed FABRIC_LIMITS in the environment
        sys.stderr.write(f"error: {exc}\n")
        return 2
    try:
        rv = command.main(args=argv, prog_name="fabric", standalone_mode=False)
    except FabricError as exc:
        sys.stderr.write(f"error: {_line(str(_named_for_command(exc, command, argv)))}\n")
        return 2
    except ComputeError as exc:
        sys.stderr.write(f"error: {_line(str(exc))}\n")
        return 1
    except click_exc.NoArgsIsHelpError as exc:
        sys.stderr.write(exc.ctx.get_help() + "\n" if exc.ctx else "")
        return 2
    except click_exc.UsageError as exc:
        sys.stderr.write(f"error: {_line(_usage_line(exc))}\n")
        return 2
    except typer.Exit as exc:
        return getattr(exc, "exit_code", 0)
    except typer.Abort:
        sys.stderr.write("error: aborted\n")
        return 1
    except BrokenPipeError:  # the reader of stdout went away (`| head`): stop quietly, as a shell tool does
        return _stdout_gone()
    except OSError as exc:
        # a path the user gave that the OS refuses (name too long, a loop of links, ...): blame its flag
        flag = _flag_of_value(argv if argv is not None else sys.argv[1:], exc.filename)
        if flag is None:  # no input of the user's: the output (stdout on a full disk, ...); one line, exit 1
            what = f"cannot use {_line(str(exc.filename))}" if exc.filename else "cannot write the output"
            sys.stderr.write(f"error: {what}: {exc.strerror or exc}\n")
            return 1
        shown = str(exc.filename)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        sys.stderr.write(f"error: {flag}: cannot use {shown!r} ({exc.strerror or exc})\n")
        return 2
    except (MemoryError, RecursionError) as exc:
        # a request the estimates let through: one line, never a traceback, and not blamed on the user's flag
        sys.stderr.write(f"error: out of {'memory' if isinstance(exc, MemoryError) else 'stack'} "
                         f"({type(exc).__name__}); try a smaller --gpus or lower `fabric --limit`\n")
        return 2
    finally:
        limits.reset(token)
    return rv if isinstance(rv, int) else 0


def command_options(group, name: str) -> set[str]:
    """The option strings (``--tp``, ``-p``, ...) of command ``name`` of the click ``group`` (empty if unknown)."""
    cmd = group.commands.get(name) if hasattr(group, "commands") else None
    return {o for p in (cmd.params if cmd is not None else ()) for o in p.opts if o.startswith("-")}


def _named_for_command(exc: FabricError, group, argv: list[str] | None) -> FabricError:
    """The error with its library parameter named as the running command's flag (:mod:`cli.flags`)."""
    args = sys.argv[1:] if argv is None else list(argv)
    # the first word that is a command: global options' values (`--limit memory=8GB`) come before it
    commands = getattr(group, "commands", {})
    name = next((a for a in args if a in commands), "")
    if exc.field == "ARCH" and any(a == "--topology" or a.startswith("--topology=") for a in args):
        # the fabric's structure is at fault (no ToRs for the orchestrator, ...): with a file, that is the file
        exc = FabricError("--topology", exc.message)
    return on_command(exc, name, command_options(group, name))


def _flag_of_value(argv: list[str], value) -> str | None:
    """The flag (or ARG for a positional) whose value on the command line is ``value``, if any."""
    if value is None:
        return None
    value = str(value)
    for i, tok in enumerate(argv):
        if tok.startswith("--") and "=" in tok and tok.split("=", 1)[1] == value:
            return tok.split("=", 1)[0]
        if tok == value:
            prev = argv[i - 1] if i > 0 else ""
            if prev.startswith("-"):
                return prev
            return {"sweep": "SPEC", "results": "DIR", "report": "DIR"}.get(argv[0] if argv else "", "ARCH")
    return None


def _usage_line(exc) -> str:
    """Click's usage message on one line; an extra argument is quoted so that an empty one shows as ''."""
    import re

    if isinstance(exc, click_exc.NoSuchOption) and exc.option_name == "--limit":
        # a root option given after the command: click only knows it before
        return ("--limit: give it before the command, e.g. `fabric --limit NAME=N "
                f"{exc.ctx.info_name if exc.ctx else 'COMMAND'} ...`")
    msg = " ".join(exc.format_message().split())
    m = re.match(r"Got unexpected extra argument(?:\(s\)|s)? \((.*)\)$", msg)
    if m:
        cmd = exc.ctx.command_path if exc.ctx else "fabric"
        return f"unexpected extra argument(s) {m.group(1)!r}; see `{cmd} --help`"
    return msg


def _stdout_gone() -> int:
    """Exit status after stdout's reader went away; stdout is pointed at /dev/null so that Python's final flush
    does not print "Exception ignored ... BrokenPipeError" on stderr."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (stdout replaced in-process)
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a pipeline stage stopped this way


def entry() -> None:
    rc = main()
    try:  # buffered output is written here: a full disk or a closed pipe must not end in a traceback
        sys.stdout.flush()
    except BrokenPipeError:
        rc = _stdout_gone()
    except OSError as exc:
        sys.stderr.write(f"error: cannot write the output: {exc.strerror or exc}\n")
        rc = 1
    sys.exit(rc)
