"""HiGHS in a child process, stopped at its time limit: a hard limit for the solves that overran it in process.

HiGHS checks its time limit between steps of its own choosing, and some steps
run for seconds without looking: the MIP presolve (HiGHS issues 1501, 2478)
and the root's cut separation rounds.  Measured on an explicit orchestrator
model of 22k columns (1,024 interleaved nodes, TP 8 x DP 16 x PP 4) at a
20 s limit: one separation round ran from 12.0 s to 20.7 s, and the answer
came 1.5-4.8 s late.  ``Highs.cancelSolve`` and the interrupt callbacks are
not looked at there either (called three times in that solve).

:class:`ChildHighs` stands in for ``highspy.Highs`` in PuLP's HiGHS solver:
it takes the options, the model's arrays and the start, and its ``run``
hands them to this file run as a script in a fresh interpreter (it imports
nothing of the project).  The child solves with the time that is left and
sends back every improving incumbent HiGHS reports (``kCallbackMip
ImprovingSolution``) and its final answer.  The parent waits until the
limit plus :data:`GRACE_S`; a child still running then is killed and the
last incumbent it sent that meets the model's rows, bounds and integrality
is the answer (model status ``kTimeLimit``, no dual bound: the caller's
known and trivial bounds stand), so the solve ends within the grace
whatever HiGHS is doing.  Same model, options and start give the same answer as in
process when the child is not killed (tests).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np

KEEP = 4  # incumbents held back in case the last ones do not check out
GRACE_S = 0.5  # after the limit, for HiGHS to stop on its own and send its answer (a few ms for 100k columns)
STOPPED = "Time limit reached (HiGHS stopped at the hard limit)"
CHILD = os.path.abspath(__file__)  # the script the child runs (this file)


class ChildHighs:
    """The part of ``highspy.Highs`` that PuLP's HiGHS solver and :mod:`solvers.pulp_adapter` use."""

    def __init__(self):
        self.options: dict = {}
        self.model: dict | None = None
        self.start: tuple | None = None
        self._answer: dict = {}
        self.killed = False

    def setOptionValue(self, name: str, value) -> None:  # noqa: N802 - highspy's name
        self.options[name] = value

    def pass_arrays(self, model: dict) -> None:
        """The model as the arrays of a row-wise ``HighsLp`` (see :func:`_highs_lp`)."""
        self.model = model

    def setSolution(self, count: int, index, value) -> None:  # noqa: N802
        self.start = (np.asarray(index, dtype=np.int32), np.asarray(value, dtype=np.float64))

    def run(self) -> None:
        """Solve in a child process; return by the time limit plus :data:`GRACE_S` at the latest."""
        limit = self.options.get("time_limit")
        deadline = None if limit is None else time.time() + float(limit)
        read, write = os.pipe()
        child = subprocess.Popen([sys.executable, CHILD, str(write)], stdin=subprocess.PIPE,
                                 pass_fds=(write,), close_fds=True)
        os.close(write)
        messages = _Messages(read)
        try:
            try:
                pickle.dump({"model": self.model, "options": self.options, "start": self.start,
                             "deadline": deadline}, child.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                child.stdin.close()
            except BrokenPipeError:
                pass  # the child died at start-up: its exit is reported below
            wait = None if deadline is None else max(deadline + GRACE_S - time.time(), 0.0)
            if not messages.done.wait(wait):
                child.kill()
                self.killed = True
        finally:  # an interrupt (Ctrl-C) while waiting must not leave the solver running
            if child.poll() is None and not messages.done.is_set():
                child.kill()
            child.wait()
        messages.thread.join()
        self._answer = messages.answer(self.model, child.returncode, self.killed)

    # --- what PuLP and the adapter read back
    def getModelStatus(self):  # noqa: N802
        import highspy

        return getattr(highspy.HighsModelStatus, self._answer["status"])

    def modelStatusToString(self, status) -> str:  # noqa: N802
        return self._answer["status_text"]

    def getInfo(self) -> SimpleNamespace:  # noqa: N802
        a = self._answer
        return SimpleNamespace(primal_solution_status=a["primal_solution_status"],
                               objective_function_value=a["objective"], mip_dual_bound=a["dual_bound"])

    def getObjectiveValue(self) -> float:  # noqa: N802
        return self._answer["objective"]

    def getSolution(self) -> SimpleNamespace:  # noqa: N802
        a = self._answer
        return SimpleNamespace(col_value=a["col_value"], col_dual=a["col_dual"], row_value=a["row_value"],
                               row_dual=a["row_dual"])


class _Messages:
    """Reads the child's pickles as they come: incumbents and the final answer."""

    def __init__(self, fd: int):
        self.incumbents: list = []  # col_value of each improving solution, last kept at most KEEP
        self.final = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self.thread.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as f:
            while True:
                try:
                    kind, *body = pickle.load(f)
                except (EOFError, pickle.UnpicklingError, OSError):
                    break
                if kind == "incumbent":
                    self.incumbents = self.incumbents[-(KEEP - 1):] + [body[0]]
                elif kind == "done":
                    self.final = body[0]
                    break
        self.done.set()

    def answer(self, model: dict, returncode: int, killed: bool) -> dict:
        """The final answer, or one made of the last incumbent when the child did not give it."""
        if self.final is not None:
            return self.final
        n, m = len(model["cost"]), len(model["row_lower"])
        zeros_n, zeros_m = np.zeros(n), np.zeros(m)
        if not killed:
            return {"status": "kSolveError", "status_text": f"HiGHS child process ended (exit {returncode}) "
                    "without an answer", "primal_solution_status": 0, "objective": float("inf"),
                    "dual_bound": -float("inf"), "col_value": zeros_n, "col_dual": zeros_n,
                    "row_value": zeros_m, "row_dual": zeros_m}
        # the dual bounds the callbacks carry are not kept: while HiGHS completes a partial start they are the
        # bounds of that small sub-MIP (measured: equal to the start's objective), not of the model
        no_bound = -float("inf")
        for x in reversed(self.incumbents):
            rows = _row_values(model, x)
            if _feasible(model, x, rows):
                obj = float(np.dot(model["cost"], x) + model["offset"])  # HiGHS's sense, as its info reports it
                return {"status": "kTimeLimit", "status_text": STOPPED, "primal_solution_status": 2,
                        "objective": obj, "dual_bound": no_bound, "col_value": x, "col_dual": zeros_n,
                        "row_value": rows, "row_dual": zeros_m}
        return {"status": "kTimeLimit", "status_text": STOPPED, "primal_solution_status": 0,
                "objective": float("inf"), "dual_bound": no_bound, "col_value": zeros_n, "col_dual": zeros_n,
                "row_value": zeros_m, "row_dual": zeros_m}


def _feasible(model: dict, x: np.ndarray, rows: np.ndarray, tol: float = 1e-6) -> bool:
    """``x`` has the model's length and meets its column bounds, rows and integrality (HiGHS's tolerance)."""
    if len(x) != len(model["cost"]):
        return False
    ok = (x >= model["col_lower"] - tol).all() and (x <= model["col_upper"] + tol).all()
    ok = ok and (rows >= model["row_lower"] - tol).all() and (rows <= model["row_upper"] + tol).all()
    xi = x[model["integer"]]
    return bool(ok and (np.abs(xi - np.round(xi)) <= tol).all())


def _row_values(model: dict, x: np.ndarray) -> np.ndarray:
    """``A x`` for the row-wise matrix of ``model``."""
    starts = np.asarray(model["starts"])
    terms = np.asarray(model["value"]) * x[np.asarray(model["index"], dtype=np.int64)]
    sums = np.concatenate([[0.0], np.cumsum(terms)])
    return sums[starts[1:]] - sums[starts[:-1]]


def highs_lp(model: dict):
    """A row-wise ``highspy.HighsLp`` from the arrays of :class:`ChildHighs` (``cost`` already in HiGHS's sense)."""
    import highspy

    lp = highspy.HighsLp()
    lp.num_col_ = len(model["cost"])
    lp.num_row_ = len(model["row_lower"])
    lp.col_cost_ = model["cost"]
    lp.col_lower_ = model["col_lower"]
    lp.col_upper_ = model["col_upper"]
    lp.row_lower_ = model["row_lower"]
    lp.row_upper_ = model["row_upper"]
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = model["starts"]
    lp.a_matrix_.index_ = model["index"]
    lp.a_matrix_.value_ = model["value"]
    lp.offset_ = model["offset"]
    if model["integer"].any():
        lp.integrality_ = [highspy.HighsVarType.kInteger if x else highspy.HighsVarType.kContinuous
                           for x in model["integer"]]
    return lp


# ------------------------------------------------------------------------------------------ the child
def _child(out_fd: int) -> None:
    """Read the request on stdin, solve, send the incumbents and the answer on ``out_fd``."""
    import highspy

    request = pickle.load(sys.stdin.buffer)
    out = os.fdopen(out_fd, "wb")
    lock = threading.Lock()

    def send(*message) -> None:
        with lock:  # HiGHS may call back from its worker threads
            pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()

    h = highspy.Highs()
    for name, value in request["options"].items():
        h.setOptionValue(name, value)
    if request["deadline"] is not None:
        h.setOptionValue("time_limit", max(request["deadline"] - time.time(), 1e-3))
    h.passModel(highs_lp(request["model"]))
    if request["start"] is not None:
        index, value = request["start"]
        h.setSolution(len(index), index, value)
    cb = highspy.cb.HighsCallbackType

    def on_event(kind, message, data_out, data_in, user_data) -> None:
        send("incumbent", np.array(data_out.mip_solution, dtype=np.float64))

    h.setCallback(on_event, None)
    h.startCallback(cb.kCallbackMipImprovingSolution)
    h.run()
    h.stopCallback(cb.kCallbackMipImprovingSolution)
    status = h.getModelStatus()
    info = h.getInfo()
    sol = h.getSolution()
    send("done", {"status": status.name, "status_text": h.modelStatusToString(status),
                  "primal_solution_status": int(info.primal_solution_status),
                  "objective": float(info.objective_function_value), "dual_bound": float(info.mip_dual_bound),
                  "col_value": np.array(sol.col_value), "col_dual": np.array(sol.col_dual),
                  "row_value": np.array(sol.row_value), "row_dual": np.array(sol.row_dual)})
    out.close()


if __name__ == "__main__":
    _child(int(sys.argv[1]))
