"""Run a notebook with nbclient, its kernel inside a :class:`~autograder.sandbox.Sandbox`.

The kernel talks to us over ZeroMQ ``ipc://`` sockets in the sandbox's ``run/``
folder: no TCP ports at all, so parallel workers never share or race for ports,
and the kernel can live in an empty network namespace. Limits added here, on
top of the sandbox's:

- a wall-clock timeout per cell and one for the whole notebook;
- a cap on the notebook's total output (streams, displays, tracebacks) and on
  any single message (ZeroMQ drops bigger ones before they reach our memory);
- answers (:data:`~autograder.collect.ANSWER_MIME` displays) are kept apart
  from that cap, up to a count and a size of their own.

:func:`execute_notebook` never raises for anything the learner's code does: the
outcome is an :class:`Execution` with a status.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .collect import ANSWER_MIME
from .sandbox import KiB, MiB, Sandbox

KERNEL_NAME = "course-grade-sandbox"
log = logging.getLogger(__name__)


@dataclass
class Execution:
    """What happened when the notebook ran."""

    nb: nbformat.NotebookNode
    """The notebook with the outputs it produced (cells after a stop keep no outputs)."""
    status: str
    """"completed", "timeout", "kernel_died", "memory_limit" or "grader_error"."""
    message: str
    """One line for the instructor and the learner; empty when completed."""
    stopped_at: int | None
    """Index of the cell that was running when execution stopped, if it stopped early."""
    seconds: float
    """Wall-clock time from kernel start to finish."""


def _text_size(content: dict) -> int:
    if "text" in content:
        return len(content["text"])
    if "data" in content:
        return sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in content["data"].values())
    if "traceback" in content:
        return sum(len(t) for t in content["traceback"]) + len(content.get("evalue", ""))
    return 0


def _sliced(get_msg, slice_s: float = 0.25):
    """``get_msg`` that polls in short slices: a wake-up missed by the asyncio ZeroMQ poller
    (seen here as a reply arriving exactly one cell timeout late) costs a slice, not the timeout.
    Each new poll first checks the socket without waiting, so a queued message is found at once.
    """
    from queue import Empty

    async def get(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = slice_s if deadline is None else max(0.0, min(slice_s, deadline - time.monotonic()))
            try:
                return await get_msg(timeout=step)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
    return get


def _make_client_class():
    from nbclient import NotebookClient

    class CappedClient(NotebookClient):
        """A NotebookClient that drops output beyond a budget (answers have their own)."""

        max_output_bytes = 1 * MiB
        max_answer_bytes = 64 * KiB
        max_answers = 64

        async def async_start_new_kernel_client(self):
            kc = await super().async_start_new_kernel_client()
            for channel in (kc.shell_channel, kc.iopub_channel):
                channel.get_msg = _sliced(channel.get_msg)
            return kc

        def reset_execution_trackers(self) -> None:
            super().reset_execution_trackers()
            self._output_bytes = 0
            self._answers = 0
            self._truncated_cells: set[int] = set()

        def output(self, outs, msg, display_id, cell_index):
            content = msg.get("content", {})
            size = _text_size(content)
            data = content.get("data") or {}
            if ANSWER_MIME in data:
                if size > self.max_answer_bytes or self._answers >= self.max_answers:
                    self._note_truncated(outs, cell_index, "answer output dropped: too large or too many")
                    return None
                self._answers += 1
                return super().output(outs, msg, display_id, cell_index)
            if self._output_bytes + size > self.max_output_bytes:
                self._note_truncated(outs, cell_index, f"output truncated: the notebook printed more than "
                                                       f"{self.max_output_bytes // KiB} KiB")
                return None
            self._output_bytes += size
            return super().output(outs, msg, display_id, cell_index)

        def _update_display_id(self, display_id, msg):
            content = msg.get("content", {})
            if ANSWER_MIME in (content.get("data") or {}):
                return  # answers are never updated in place
            if self._output_bytes + _text_size(content) > self.max_output_bytes:
                return
            super()._update_display_id(display_id, msg)

        def _note_truncated(self, outs, cell_index, why):
            if cell_index not in self._truncated_cells:
                self._truncated_cells.add(cell_index)
                outs.append(nbformat.v4.new_output("stream", name="stderr", text=f"[{why}]\n"))

    return CappedClient


def _kernel_manager(sandbox: Sandbox, max_message_bytes: int):
    import zmq
    import zmq.asyncio
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    spec_dir = sandbox.root / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    argv = sandbox.command([sys.executable, "-P", "-s", "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": argv, "display_name": "Python 3 (sandboxed grader)", "language": "python",
        "interrupt_mode": "signal", "metadata": {"debugger": False}}))
    ksm = KernelSpecManager(kernel_dirs=[str(sandbox.root / "kernels")])
    context = zmq.asyncio.Context()
    # Messages larger than this are dropped by ZeroMQ before Python ever sees them.
    context.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
    km = AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=ksm, context=context,
                            transport="ipc", ip=str(sandbox.run_dir / "k"),
                            connection_file=str(sandbox.run_dir / "kernel.json"))
    return km, context


def execute_notebook(nb: nbformat.NotebookNode, sandbox: Sandbox, *, cell_timeout: float = 60,
                     notebook_timeout: float = 300, max_output_bytes: int = 1 * MiB,
                     max_message_bytes: int = 32 * MiB, startup_timeout: float = 60) -> Execution:
    """Execute every code cell of ``nb`` (in place) in a fresh sandboxed kernel, errors allowed."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    start = time.monotonic()
    # The notebook's clock starts with its first cell; kernel start-up has startup_timeout.
    state = {"index": None, "notebook_limited": False, "deadline": None}

    def timeout_func(cell) -> int:
        left = state["deadline"] - time.monotonic()
        state["notebook_limited"] = left < cell_timeout
        return max(1, int(min(cell_timeout, left) + 0.999))

    def on_cell_start(cell, cell_index, **_):
        state["index"] = cell_index
        now = time.monotonic()
        if state["deadline"] is None:
            state["deadline"] = now + notebook_timeout
        log.debug("cell %d start at %.2f s", cell_index, now - start)
        if now > state["deadline"]:
            raise _NotebookDeadline()

    def on_cell_executed(cell, cell_index, execute_reply=None, **_):
        if log.isEnabledFor(logging.DEBUG) and execute_reply:
            sent = execute_reply.get("header", {}).get("date")
            log.debug("cell %d reply sent by the kernel at %s, received at %.2f s", cell_index, sent,
                      time.monotonic() - start)

    km, context = _kernel_manager(sandbox, max_message_bytes)
    client = _make_client_class()(
        nb, km=km, timeout_func=timeout_func, allow_errors=True, interrupt_on_timeout=False,
        startup_timeout=int(startup_timeout), iopub_timeout=4, raise_on_iopub_timeout=False,
        record_timing=False, shutdown_kernel="immediate", on_cell_start=on_cell_start,
        on_cell_executed=on_cell_executed,
        resources={"metadata": {"path": str(sandbox.work)}})
    client.max_output_bytes = max_output_bytes
    status, message = "completed", ""
    kernel_log = open(sandbox.log_dir / "kernel.log", "wb")
    log.debug("executing in %s", sandbox.root)
    try:
        client.execute(stdout=kernel_log, stderr=kernel_log)
    except CellTimeoutError:
        status = "timeout"
        where = _cell_name(nb, state["index"])
        if state["notebook_limited"]:
            message = f"the notebook ran out of its {notebook_timeout:g} s time limit in {where}"
        else:
            message = f"{where} ran longer than the {cell_timeout:g} s limit per cell"
    except _NotebookDeadline:
        status = "timeout"
        message = f"the notebook ran out of its {notebook_timeout:g} s time limit before {_cell_name(nb, state['index'])}"
    except DeadKernelError:
        status = "kernel_died"
        message = f"the kernel died while running {_cell_name(nb, state['index'])}"
    except RuntimeError as e:
        if "Kernel didn't respond" in str(e) or "Kernel died before replying" in str(e):
            status, message = "grader_error", f"the sandboxed kernel did not start: {e}"
        elif state["index"] is None:
            status, message = "grader_error", f"the sandboxed kernel did not start: {e}"
        else:
            status, message = "kernel_died", f"the kernel stopped responding in {_cell_name(nb, state['index'])}: {e}"
    finally:
        log.debug("execution ended (%s) at %.2f s", status, time.monotonic() - start)
        kernel_log.close()
        try:
            if client.km is not None:
                client._cleanup_kernel()
        except Exception:
            pass
        context.destroy(linger=0)
        log.debug("kernel cleaned up at %.2f s", time.monotonic() - start)
    if status in ("kernel_died", "completed", "timeout") and sandbox.memory_exceeded():
        status = "memory_limit"
        message = (f"the notebook used more than its memory limit of {sandbox.limits.memory_text()} "
                   f"in {_cell_name(nb, state['index'])}")
    elif status == "completed":
        hit = _memory_error_cell(nb)
        if hit is not None:
            status = "memory_limit"
            message = (f"{_cell_name(nb, hit)} ran out of memory (limit "
                       f"{sandbox.limits.memory_text()}); later cells still ran")
    stopped = None if status == "completed" else state["index"]
    if status == "kernel_died":
        tail = _tail(sandbox.log_dir / "kernel.log")
        if "MemoryError" in tail or "bad_alloc" in tail or "Cannot allocate memory" in tail:
            status = "memory_limit"
            message = (f"the kernel ran out of memory (limit {sandbox.limits.memory_text()}) "
                       f"in {_cell_name(nb, state['index'])}")
    return Execution(nb=nb, status=status, message=message, stopped_at=stopped,
                     seconds=round(time.monotonic() - start, 3))


class _NotebookDeadline(Exception):
    pass


def _cell_name(nb, index: int | None) -> str:
    if index is None:
        return "kernel start-up"
    cell = nb.cells[index]
    gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return f"cell {index + 1}" + (f" ({gid})" if gid else "")


def _memory_error_cell(nb) -> int | None:
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and out.get("ename") == "MemoryError":
                return i
    return None


def _tail(path: Path, n: int = 4096) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
