"""The one error type every edge of the tool raises for bad input.

A :class:`FabricError` names the offending field and what is allowed; the CLI
prints it on one line and exits with status 2, without a traceback.
"""


class FabricError(ValueError):
    """Bad input: an unknown name, an out-of-range value, a malformed file.

    Parameters
    ----------
    field : str
        The name of the input that is wrong (a CLI flag, a ``-p`` parameter, a
        key in a file, ``file.yaml:key``).
    message : str
        What is wrong and what is allowed.
    """

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class LimitError(FabricError):
    """A request over a resource limit (:mod:`fabric.limits`): too large for this machine's limits, not malformed.

    A caller that tries many candidates (the configuration search) may drop the one refused and go on.
    """


class ComputeError(RuntimeError):
    """A computation failed for a reason other than bad input (a solver error, every point of a table failed).

    The CLI prints it on one line and exits with status 1 (2 is kept for bad input).

    Parameters
    ----------
    what : str
        What failed (``solver``, ``rl table``, ``sweep``).
    message : str
        Why, and what the user can do.
    """

    def __init__(self, what: str, message: str):
        self.what = what
        self.message = message
        super().__init__(f"{what}: {message}")
