"""Every command's --help reads as a newcomer expects: flags as flags, every option described, no source files."""

from __future__ import annotations

import pytest
import typer

from cli.app import app, tidy_help


def _commands():
    command = typer.main.get_command(app)
    tidy_help(command)
    return command, sorted(command.commands)


COMMAND, NAMES = _commands()


@pytest.mark.parametrize("name", NAMES)
def test_every_option_has_help(name):
    sub = COMMAND.commands[name]
    for param in sub.params:
        assert (getattr(param, "help", None) or "").strip(), f"fabric {name}: {param.name} has no help text"


@pytest.mark.parametrize("name", NAMES)
def test_help_shows_flags_as_flags_and_no_source_files(name, run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    rc, stdout, _ = run_cli(name, "--help")
    assert rc == 0
    assert "<bool>" not in stdout, f"fabric {name} --help shows a flag as taking a value"
    assert ".py" not in stdout, f"fabric {name} --help points to a source file"
    # arguments in capitals, like the README (ARCH, SPEC, DIR)
    for param in COMMAND.commands[name].params:
        if param.param_type_name == "argument":
            assert param.metavar == param.metavar.upper()


def test_arch_argument_says_when_it_is_required(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    rc, stdout, _ = run_cli("cost", "--help")
    assert rc == 0 and "required unless --topology FILE is given" in " ".join(stdout.split())  # any wrapping
