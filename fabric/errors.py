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
