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

from fabric.errors import FabricError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Design the interconnect of AI training clusters: cost, faults, collectives, MFU.")

# Command groups, in `fabric --help` order.  Each module defines register(app).
COMMAND_MODULES = ["cli.build", "cli.cost", "cli.sweep", "cli.view", "cli.faults", "cli.simulate", "cli.mfu", "cli.rl", "cli.orchestrate"]


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


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit status (0 ok, 2 bad input)."""
    from cli.validate import install
    from fabric import limits

    command = typer.main.get_command(app)
    install(command)
    token = limits.set_limits(limits.current())
    try:
        rv = command.main(args=argv, prog_name="fabric", standalone_mode=False)
    except FabricError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except click_exc.NoArgsIsHelpError as exc:
        sys.stderr.write(exc.ctx.get_help() + "\n" if exc.ctx else "")
        return 2
    except click_exc.UsageError as exc:
        sys.stderr.write(f"error: {_usage_line(exc)}\n")
        return 2
    except typer.Exit as exc:
        return getattr(exc, "exit_code", 0)
    except typer.Abort:
        sys.stderr.write("error: aborted\n")
        return 1
    except OSError as exc:
        # a path the user gave that the OS refuses (name too long, a loop of links, ...): blame its flag
        flag = _flag_of_value(argv if argv is not None else sys.argv[1:], exc.filename)
        if flag is None:
            raise
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
            return {"sweep": "SPEC", "results": "DIR"}.get(argv[0] if argv else "", "ARCH")
    return None


def _usage_line(exc) -> str:
    """Click's usage message on one line; an extra argument is quoted so that an empty one shows as ''."""
    import re

    msg = " ".join(exc.format_message().split())
    m = re.match(r"Got unexpected extra argument(?:\(s\)|s)? \((.*)\)$", msg)
    if m:
        cmd = exc.ctx.command_path if exc.ctx else "fabric"
        return f"unexpected extra argument(s) {m.group(1)!r}; see `{cmd} --help`"
    return msg


def entry() -> None:
    sys.exit(main())
