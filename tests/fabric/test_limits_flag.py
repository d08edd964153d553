"""`--limit NAME=N` and ``FABRIC_LIMITS``: every malformed pair is one line naming the flag and the limit, exit 2."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("pair, words", [
    ("memory=abc", "memory: cannot read 'abc' as a size"),  # named only the text, not which limit it was for
    ("memory=", "memory: "),
    ("gpus=abc", "gpus='abc' must be a whole number >= 1"),
    ("gpus=0", "gpus='0' must be a whole number >= 1"),
    ("links=1.5", "links='1.5' must be a whole number >= 1"),
    ("foo=1", "must be NAME=N with NAME one of"),
    ("gpus", "must be NAME=N with NAME one of"),
])
def test_bad_limit_is_one_line_naming_the_limit(run_cli, pair, words):
    rc, out, err = run_cli("--limit", pair, "list")
    assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: --limit: ") and words in err, err


def test_bad_environment_limit_names_the_variable_and_the_limit(run_cli, monkeypatch):
    monkeypatch.setenv("FABRIC_LIMITS", "links=5e7,memory=xx")
    rc, out, err = run_cli("list")
    assert rc == 2 and out == ""
    assert err == "error: FABRIC_LIMITS: memory: cannot read 'xx' as a size (e.g. 1GiB, 512MB)\n"
