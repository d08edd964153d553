"""The ``fabric`` command line: a thin Typer shell over importable functions."""
