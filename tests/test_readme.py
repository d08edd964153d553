"""README.md's console blocks are real output of the commands they show (see tests/readme.py for the tolerance).

Refresh them all after changing a command's output: ``.venv/bin/python -m tests.readme --update``.
"""

from __future__ import annotations

import pytest

from tests.readme import README, blocks, missing_input, normalise, run

COMMANDS = [c for b in blocks(README.read_text()) for c in b]


def test_readme_has_console_blocks():
    assert len(COMMANDS) >= 5


def test_timings_are_masked_and_nothing_else():
    assert normalise("searched 2,428 configurations in 1.2 s; 3.4 points/s, 15 ms") == \
        "searched 2,428 configurations in <t> s; <t> points/s, <t> ms"
    assert normalise("MFU 59.3 % | 4,608 GPUs | $1,250") == "MFU 59.3 % | 4,608 GPUs | $1,250"


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.line[:60] for c in COMMANDS])
def test_console_block_matches_real_output(cmd):
    why = missing_input(cmd.line)
    if why:
        pytest.skip(why)
    assert normalise(run(cmd.line)) == normalise(cmd.expected), (
        f"README is stale for `$ {cmd.line}`: run `python -m tests.readme --update` and review the diff")


def test_command_table_lists_every_command():
    import typer

    from cli.app import app

    text = README.read_text()
    table = text[text.index("| command | what it answers |"):text.index("Architectures: `fat-tree`")]
    for name in typer.main.get_command(app).commands:
        assert f"| `fabric {name}" in table, f"the README's command table leaves out `fabric {name}`"
