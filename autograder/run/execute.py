"""Run a notebook's code cells, one at a time, in a sandboxed kernel that may hang, flood or die.

The kernel talks to us over ZeroMQ ``ipc://`` sockets in the sandbox's ``run/``
folder: no TCP ports at all, so parallel workers never share or race for ports,
and the kernel can live in an empty network namespace. The cells are driven
here, by a plain loop over a ZeroMQ poller (no asyncio tasks that could outlive
their cell), with nbclient's output model (:class:`nbclient.NotebookClient`'s
``process_message``) turning messages into outputs.

What a cell may do, and what the grader does then (stock nbgrader loses every
answer after a kernel death or, with nbclient's defaults, after a timeout):

===============================================  ===============================================
The cell                                         The grader
===============================================  ===============================================
runs past the per-cell timeout                   interrupts it (KeyboardInterrupt) and goes on
ignores the interrupt (catches KeyboardInterrupt, kills the kernel, starts a fresh one in the
SIG_IGN, a long C call), or kills the kernel     same sandbox (:func:`start_kernel`), replays the
(os._exit, the memory cap, a fork bomb), or      cells that completed before it (their outputs
leaves the process cap exhausted                 discarded: the first run's stand), and goes on
                                                 after it; at most ``max_restarts`` times
runs past the notebook's time limit              stops: later cells are not run
waits (sleeps, blocks on a read, for most of     stops: later cells are not run, and the record
the time, working or not) past the hand-in's idle says so (waiting is not free: a worker is held)
allowance (``idle_factor`` times the time limit;
:class:`Budget`), or past its wall-clock backstop
(one for all the hand-in's notebooks: :class:`Clock`)
never answers a request the kernel failed on     replaced by a fresh kernel as above, told from
(ipykernel only logs the handler's error)        the kernel's idle status without a reply
prints past the output cap                       keeps the first bytes, notes the cut (on stdout:
                                                 it costs no points), and drops the rest unparsed
                                                 (a flood costs the grader ~0)
sends a message nested deeper than               reads none of it (:mod:`autograder.contract.jsonshape`
:data:`MAX_MESSAGE_DEPTH` levels or holding more  reads its shape from the bytes first) and fails
than :data:`MAX_MESSAGE_CONTAINERS` objects and  the cell with an error output saying so
arrays or :data:`MAX_MESSAGE_VALUES` values (on
its own IOPub socket)
===============================================  ===============================================

Each such cell becomes a :class:`CellEvent`; the notebook's status names the
worst (:data:`~autograder.contract.results.SEVERITY`). A cell's fate is decided from what the grader itself
observed (the sandbox's cgroup counters, the kernel's process, the protocol's replies and status),
never from text the kernel can write (its ``kernel.log``, which learner code reaches through fd 2):
no learner text becomes an event's message. Without a cgroup (``--insecure`` hosts, RLIMIT_AS), the
one exception is a cell whose own error is a ``MemoryError`` or a failed fork: the memory or process
limit is named for that cell (what the learner's own code raised, on their own cell only). Answers
(:data:`~autograder.contract.answers.ANSWER_MIME` displays) are kept apart from the
output cap, up to a count and a size of their own.

:func:`execute_notebook` never raises for anything the learner's code does: the
outcome is an :class:`Execution` with a status.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from course_lib.units import MiB

from ..contract.cells import grade_id
from ..contract.jsonshape import TooLarge, shape
from ..contract.results import DISK_LIMIT, KERNEL_DIED, MEMORY_LIMIT, PROCESS_LIMIT, SEVERITY, TIMEOUT
from ..sandbox import Sandbox
from ..contract.settings import Settings
from ..contract.text import one_line
from .cell_budget import Budget, Clock
from .kernel import ERROR_CHARS, OUTPUTS, Kernel, _make_client_class, start_kernel

#: Seconds an interrupted cell has to stop before its kernel is replaced (KeyboardInterrupt takes ms).
INTERRUPT_GRACE_S = 2.0
#: Seconds to wait for a cell's last outputs after its reply (nbclient's iopub_timeout).
IOPUB_GRACE_S = 4.0
#: Poll slice: how often the loop checks the clock, the kernel's process and (without a tmpfs) the disk.
POLL_S = 0.25
#: Seconds a cell's reply may trail the kernel's idle status after it; past that, the kernel failed on the
#: request and will never answer (ipykernel's handler raised: it logs the error, publishes idle, and no reply).
REPLY_GRACE_S = 2.0
#: The deepest nesting a kernel message's parts (header, parent, metadata, content) may have, and the most
#: objects and arrays, and values, each may hold: past any, the grader parses none of it (``json.loads``
#: recursed into a RecursionError in the grader on a header 200,000 deep; 32 MiB of ``{}`` would be 16 million
#: dicts), and an IOPub message sent while a cell runs fails that cell. A figure's or a widget's JSON is ~10
#: deep, and more than the output budget (1 MiB) of it is dropped unparsed anyway.
MAX_MESSAGE_DEPTH = 100
MAX_MESSAGE_CONTAINERS = 100_000
MAX_MESSAGE_VALUES = 1_000_000
log = logging.getLogger(__name__)


@dataclass
class CellEvent:
    """Something a cell did that the grader had to act on."""

    index: int
    """The cell's position in the executed notebook."""
    status: str
    """timeout, kernel_died, memory_limit, process_limit or disk_limit (autograder.contract.results)."""
    message: str
    """Which cell, what happened, and what the grader did: one line."""


@dataclass
class Execution:
    """What happened when the notebook ran."""

    nb: nbformat.NotebookNode
    """The notebook with the outputs of its first run (cells after a stop keep no outputs)."""
    status: str
    """"completed" or the worst event: "timeout", "kernel_died", "memory_limit", "process_limit",
    "disk_limit"; "grader_error" when the first kernel could not start."""
    message: str
    """One line for the instructor and the learner; empty when completed."""
    stopped_at: int | None
    """Index of the cell where the run stopped for good (notebook time limit, restarts used up),
    or None when every cell got its turn."""
    seconds: float
    """Wall-clock time from the first kernel's start to the end."""
    events: list[CellEvent] = field(default_factory=list)
    """Every cell that timed out, died, or hit a limit, in order (stopped_at's cell included)."""
    restarts: int = 0
    """Fresh kernels started after the first."""


class _Run:
    def __init__(self, nb, sandbox: Sandbox, *, cell_timeout: float, notebook_timeout: float,
                 max_output_bytes: int, max_message_bytes: int, startup_timeout: float, max_restarts: int,
                 wall_factor: float, idle_factor: float | None, clock: Clock | None = None,
                 kernel_argv: tuple[str, ...] | None = None):
        self.nb, self.sandbox, self.kernel_argv = nb, sandbox, kernel_argv
        self.clock = clock
        """The hand-in's clock, shared with its other notebooks (None: this notebook's own)."""
        self.cell_timeout, self.notebook_timeout, self.wall_factor = cell_timeout, notebook_timeout, wall_factor
        self.idle_factor = idle_factor
        self.max_message_bytes, self.startup_timeout, self.max_restarts = max_message_bytes, startup_timeout, max_restarts
        self.client = _make_client_class()(nb, km=None)
        self.client.comm_open_handlers = {}   # no Output-widget capture: every output goes through the budget
        self.client.max_output_bytes = max_output_bytes
        self.client.reset_execution_trackers()
        self.events: list[CellEvent] = []
        self.completed: list[int] = []
        """Cells that ran to a reply in some kernel (errors included): what a fresh kernel replays."""
        self.restarts = 0
        self.refused_cells: set[int] = set()
        """Cells already failed for a message the grader would not parse (one error output each)."""
        self.kernel: Kernel | None = None
        self.notebook: Budget | None = None
        """The notebook's time, from its first cell (:class:`Budget`)."""
        self.cell_over: str | None = None
        """Which limit the last interrupted cell ran into ("cpu" or "wall")."""
        self.executed = 0
        self.stopped: int | None = None
        self._next_before: dict | None = None
        """The sandbox's counters after the last cell, when no restart came since: the next one's "before"."""
        self.start = time.monotonic()
        self.log_file = open(sandbox.log_dir / "kernel.log", "ab")

    # -- the clock
    def notebook_over(self) -> str | None:
        return None if self.notebook is None else self.notebook.over()

    def wall_left(self) -> float:
        return float("inf") if self.notebook is None else self.notebook.wall_left()

    def _out_of_time(self, where: str) -> str:
        nb = self.notebook
        over = nb.over() if nb is not None and nb.measured else None
        shared = nb is not None and nb.clock.notebooks > 1
        whose, theirs, limit = ((f"the hand-in's {nb.clock.notebooks} notebooks", "their shared", "a notebook's")
                                if shared else ("the notebook", "its", "its"))
        if over == "idle":
            return (f"{whose} waited (slept or blocked for most of the time, working or not) for more "
                    f"than {theirs} {nb.idle_s:g} s idle allowance ({self.idle_factor:g} times {limit} "
                    f"{self.notebook_timeout:g} s time limit) {where}, having used {nb.cpu_used():.1f} s of CPU "
                    + (f"in this notebook, {nb.wall_used():.0f} s into the hand-in" if shared
                       else f"in {nb.wall_used():.0f} s") + ": later cells were not run")
        if over == "wall":
            return (f"{whose} ran out of {theirs} {nb.wall_s:g} s wall-clock backstop ({self.wall_factor:g} times "
                    f"{limit} {self.notebook_timeout:g} s time limit of CPU time) {where}")
        return f"the notebook ran out of its {self.notebook_timeout:g} s time limit {where}"

    def _cell_limit(self) -> str:
        """The limit the last interrupted cell ran into, as messages say it."""
        if self.cell_over == "wall":
            return (f"the {self.cell_timeout * self.wall_factor:g} s wall-clock backstop per cell "
                    f"({self.wall_factor:g} times its {self.cell_timeout:g} s of CPU time)")
        return f"the {self.cell_timeout:g} s limit per cell"

    # -- the loop over cells
    def run(self) -> Execution:
        try:
            if self.clock is not None:   # the hand-in's backstop or allowance may be spent by the notebooks before
                self.notebook = Budget(self.sandbox, self.notebook_timeout, self.wall_factor, self.idle_factor,
                                       clock=self.clock)
                if self.notebook.measured and self.notebook.over() in ("wall", "idle"):
                    first = next((i for i, c in enumerate(self.nb.cells) if c.cell_type == "code"), 0)
                    self._stop(first, TIMEOUT, self._out_of_time("before this notebook started"))
                    return self._result(self.stopped)
                self.notebook = None
            try:
                self.kernel = self._start(self.startup_timeout)
            except Exception as e:  # noqa: BLE001 - nothing of the learner has run yet: the grader's failure
                return self._result(None, status="grader_error",
                                    message=f"the sandboxed kernel did not start: {_one_line(e)}")
            self.notebook = Budget(self.sandbox, self.notebook_timeout, self.wall_factor,
                                   self.idle_factor, clock=self.clock)  # from the first cell
            for index, cell in enumerate(self.nb.cells):
                if cell.cell_type != "code" or not cell.source.strip():
                    continue
                if self.notebook_over():
                    self._stop(index, TIMEOUT, self._out_of_time(f"before {_cell_name(self.nb, index)}"))
                    return self._result(self.stopped)
                # The last cell's "after", unless a restart came between (nothing else runs between cells).
                before, self._next_before = self._next_before or self._snapshot(), None
                outcome = self._execute(cell, index, record=True)
                if not self._after(index, outcome, before):
                    return self._result(self.stopped)
            return self._result(None)
        finally:
            self._close_kernel()
            self.log_file.close()

    def _after(self, index: int, how: str, before: dict) -> bool:
        """Record what cell ``index`` did, restart the kernel if it must; False: the run stops here."""
        name, cell, lim = _cell_name(self.nb, index), self.nb.cells[index], self.sandbox.limits
        if how == "deadline":
            self._stop(index, TIMEOUT, self._out_of_time(f"in {name}"))
            return False
        after = self._snapshot()
        limit = _limit_hit(cell, before, after, with_cgroup=self.sandbox.cgroup is not None)
        if how == "disk":  # the watchdog (no tmpfs here): restarting would find the disk as full
            self._stop(index, DISK_LIMIT, _limit_message(self.sandbox, name, DISK_LIMIT)
                       + "; the kernel was stopped: later cells were not run")
            return False
        if how == "done":
            self.completed.append(index)
            if limit:
                self.events.append(CellEvent(index, limit, _limit_message(self.sandbox, name, limit)))
        elif how == "interrupted":
            self.events.append(CellEvent(index, limit or TIMEOUT, f"{name} ran longer than {self._cell_limit()} "
                                                                  f"and was interrupted{_why(self.sandbox, limit)}"))
        elif how == "failed":   # ipykernel broke on the request itself and never answered: no slow cell
            self.events.append(CellEvent(index, limit or KERNEL_DIED, f"{name} never started: the kernel failed "
                                         f"on it before running it and never answered (e.g. an expression nested "
                                         f"too deeply for Python's compiler){_why(self.sandbox, limit)}"))
            return self._restart(index)
        elif how == "unresponsive":
            self.events.append(CellEvent(index, limit or TIMEOUT, f"{name} ran longer than "
                                         f"{self._cell_limit()} and ignored the interrupt"
                                         f"{_why(self.sandbox, limit)}"))
            return self._restart(index)
        else:  # died
            self.events.append(CellEvent(index, limit or KERNEL_DIED, _limit_message(self.sandbox, name, limit)
                                         if limit else f"the kernel died while running {name}"))
            return self._restart(index)
        if self.sandbox.cgroup is not None and after["pids"] >= lim.max_processes - 8:
            # Its processes still fill the cap, so later cells could start none: a fresh kernel.
            if not (self.events and self.events[-1].index == index):
                self.events.append(CellEvent(index, PROCESS_LIMIT, _limit_message(self.sandbox, name, PROCESS_LIMIT)))
            self.events[-1].message += " and left them running"
            return self._restart(index)
        self._next_before = after
        return True

    def _restart(self, index: int) -> bool:
        """Replace the kernel after cell ``index`` failed: a fresh one that has replayed the completed
        cells before it. False when the run must stop (restarts used up, time up, a kernel that won't start)."""
        event = self.events[-1]
        while True:
            self._close_kernel()
            if self.restarts >= self.max_restarts:
                event.message += (f"; the kernel had been restarted {self.restarts} times, the most allowed, "
                                  f"so later cells were not run")
                self.stopped = index + 1
                return False
            if self.notebook_over():
                self._stop(index + 1, TIMEOUT, self._out_of_time("before a fresh kernel could go on"))
                return False
            self.restarts += 1
            try:
                self.kernel = self._start(min(self.startup_timeout, max(1.0, self.wall_left())))
            except Exception as e:  # noqa: BLE001 - the learner's files (an IPython startup file) can do this
                self._stop(index + 1, KERNEL_DIED, f"a fresh kernel did not start after {_cell_name(self.nb, index)} "
                                                   f"({_one_line(e)}): later cells were not run")
                return False
            how = self._replay(index)
            if how is None:
                event.message += "; a fresh kernel replayed the cells before it and went on"
                return True
            if how == "deadline":
                self._stop(index + 1, TIMEOUT, self._out_of_time(f"while a fresh kernel replayed the cells before "
                                                                 f"{_cell_name(self.nb, index)}"))
                return False
            if how == "disk":  # the watchdog again: another kernel would find the disk as full
                self.stopped = index + 1
                return False
            # died or unresponsive on replay: that cell is left out (see _replay), and we try again

    def _replay(self, index: int) -> str | None:
        """Run the completed cells before ``index`` again, outputs discarded (the first run's stand).

        A cell that fails now is left out of later replays, with an event; returns how the replay
        ended when the kernel is lost (``died``, ``unresponsive``, ``disk``) or the time is up, else None.
        """
        for j in [c for c in self.completed if c < index]:
            how = self._execute(self.nb.cells[j], j, record=False)
            if how == "done":
                continue
            if how == "deadline":
                return how
            self.completed.remove(j)
            status = KERNEL_DIED if how in ("died", "disk", "failed") else TIMEOUT
            self.events.append(CellEvent(j, status, f"{_cell_name(self.nb, j)} completed at first but "
                                                    f"{'was interrupted' if how == 'interrupted' else how} when a "
                                                    f"fresh kernel replayed it, so later replays leave it out"))
            if how != "interrupted":
                return how
        return None

    def _start(self, timeout: float) -> Kernel:
        t = time.monotonic()
        kernel = start_kernel(self.sandbox, startup_timeout=timeout, max_message_bytes=self.max_message_bytes,
                              log_file=self.log_file, kernel_argv=self.kernel_argv)
        log.debug("kernel started in %.2f s", time.monotonic() - t)
        return kernel

    def _close_kernel(self) -> None:
        if self.kernel is not None:
            self.kernel.close()
            self.kernel = None
        self.sandbox.kill_all()  # what the kernel forked (a fork bomb's children) goes with it

    def _snapshot(self) -> dict:
        """The sandbox's event counters and whether its disk is full, to compare before/after a cell."""
        return dict(self.sandbox.counters(), disk_full=self.sandbox.disk_full())

    # -- one execute_request
    def _execute(self, cell, index: int, *, record: bool) -> str:
        """Send one cell and wait for its reply and its last output, within its time; how it ended:

        "done" (a reply), "interrupted" (a reply after our interrupt), "unresponsive" (none even after
        the interrupt), "failed" (the kernel went idle after the request without a reply: its handler
        broke on it), "died" (the kernel's process is gone), "deadline" (the notebook's time is up),
        "disk" (the watchdog saw the disk cap passed).

        A reply with status "error" whose error is not among the cell's outputs (an IPython custom
        exception handler swallowed the traceback) gets an error output from the reply, as stock
        nbgrader's Execute preprocessor does (``on_cell_executed``): nbgrader's rule then gives 0.
        """
        import zmq

        kernel = self.kernel
        kc, session = kernel.kc, kernel.kc.session
        msg_id = kc.execute(cell.source, store_history=True, allow_stdin=False, stop_on_error=False)
        if record:
            cell.outputs = []
            self.client.clear_before_next_output = False
            self.executed += 1
        budget = Budget(self.sandbox, self.cell_timeout, self.wall_factor)
        reply, idle, interrupted, reply_at, idle_at = None, False, False, None, None
        poller = zmq.Poller()
        for sock in (kernel.shell, kernel.iopub, kernel.iopub_monitor):
            poller.register(sock, zmq.POLLIN)
        watch_disk = not self.sandbox.disk_capped
        while reply is None or not idle:
            now = time.monotonic()
            if reply is not None and now - reply_at > IOPUB_GRACE_S:
                # The reply came; its last outputs did not (nbclient: "Timeout waiting for IOPub output"):
                # late, or dropped unread with everything after them (a message over max_message_bytes).
                # What arrived meanwhile is read first (a grader starved by a busy machine reads late).
                self._drain(session, msg_id, cell, index, record)
                break
            if reply is None:
                if self.notebook_over():
                    return "deadline"
                over = budget.over()
                if over and interrupted:
                    return "unresponsive"
                if over:
                    kernel.interrupt()
                    interrupted, self.cell_over = True, over
                    budget = Budget(self.sandbox, INTERRUPT_GRACE_S, self.wall_factor)
                    continue
                if idle and now - idle_at > REPLY_GRACE_S:
                    # ipykernel's handler broke on the request: it published idle and will never reply. Told
                    # from the protocol, as it happens (not the cell's wall-clock backstop, 4 x its limit: a
                    # kernel that waits uses no CPU); the kernel's log, which learner code can write, is not read.
                    return "failed"
            ready = dict(poller.poll(int(POLL_S * 1000) + 1))
            if kernel.iopub_monitor in ready and kernel.iopub_dropped():
                # The kernel died, or sent a message over the size limit: ZeroMQ dropped it unread, and
                # the connection with it (a death takes the monitor and the init a moment to show).
                if _gone(kernel, 0.5):
                    return "died"
                for sock in (kernel.iopub, kernel.iopub_monitor):
                    poller.unregister(sock)
                kernel.reconnect_iopub()
                for sock in (kernel.iopub, kernel.iopub_monitor):
                    poller.register(sock, zmq.POLLIN)
                if record:
                    self.client.note_later(cell.outputs, index, f"output truncated: a message over "
                                           f"{self.max_message_bytes // MiB} MiB was dropped unread")
                self._resync_iopub()
                if reply is not None:
                    break   # its idle status may have gone with the connection
                continue
            if kernel.iopub in ready:
                for _ in range(64):  # a bounded drain: the shell socket gets its turn during a flood
                    try:
                        frames = kernel.iopub.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    if self._on_iopub(frames, session, msg_id, cell, index, record) and not idle:
                        idle, idle_at = True, time.monotonic()
            if kernel.shell in ready and reply is None:
                while True:
                    try:
                        frames = kernel.shell.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    msg = _deserialize(session, frames)
                    if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
                        reply, reply_at = msg, time.monotonic()
                        break
            if not ready:
                if not kernel.alive():
                    return "died"
                if watch_disk and self.sandbox.disk_full():
                    return "disk"
        if record:
            _error_from_reply(cell, reply)
            self.client.flush_note()
            cell.execution_count = self.executed
        return "interrupted" if interrupted else "done"

    def _resync_iopub(self, timeout: float = 5.0) -> bool:
        """Wait until a fresh IOPub socket delivers (a SUB socket misses what is sent before its
        subscription reaches the kernel). Proof: a status message for a kernel_info request sent on
        the control channel, which the kernel answers even while a cell runs. False if none came
        within ``timeout``."""
        import zmq

        kernel = self.kernel
        deadline = time.monotonic() + max(0.0, min(timeout, self.wall_left()))
        while time.monotonic() < deadline and kernel.alive():
            msg = kernel.kc.session.msg("kernel_info_request", content={})
            kernel.kc.control_channel.send(msg)
            request = msg["header"]["msg_id"]
            until = min(deadline, time.monotonic() + 0.5)
            while time.monotonic() < until:
                if not kernel.iopub.poll(int(POLL_S * 1000)):
                    continue
                for _ in range(64):
                    try:
                        frames = kernel.iopub.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    try:
                        _, parts = kernel.kc.session.feed_identities(frames, copy=False)
                        if _unparsable(parts[2:3]) is None and json.loads(parts[2].bytes).get("msg_id") == request:
                            return True
                    except (ValueError, IndexError, TypeError, AttributeError):
                        continue
        return False

    def _drain(self, session, msg_id, cell, index, record) -> bool:
        """Read what IOPub holds now, without waiting; True if the kernel's idle status was among it."""
        import zmq

        idle = False
        for _ in range(4096):
            try:
                frames = self.kernel.iopub.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            idle |= self._on_iopub(frames, session, msg_id, cell, index, record)
            if idle:
                break
        return idle

    def _on_iopub(self, frames, session, msg_id, cell, index, record) -> bool:
        """Handle one IOPub message; True when it says the kernel went idle after our request.

        Only the small header frames are read first: a message for another request, or an output
        past the budget, is dropped without parsing (or verifying) its content.
        """
        try:
            _, parts = session.feed_identities(frames, copy=False)
            why = _unparsable(parts[1:3])
            if why is not None:   # whose it is cannot be read: the cell running now (learner code sent it)
                self._refuse(cell, index, record, why)
                return False
            header = json.loads(parts[1].bytes)
            parent = json.loads(parts[2].bytes)
        except (ValueError, IndexError, TypeError):
            return False
        if not isinstance(parent, dict) or parent.get("msg_id") != msg_id or not isinstance(header, dict):
            return False
        msg_type = header.get("msg_type")
        if msg_type != "status" and (not record or msg_type == "execute_input"):
            return False
        client = self.client
        wire = sum(len(part) for part in parts)   # the whole serialized message: every byte counts (no copy)
        if msg_type != "status" and wire > client.room(index):
            # Past the budget, a message is dropped before it is parsed (a flood costs the grader ~0),
            # except what may be kept anyway: an answer (a budget of its own), a cell's first error.
            may_keep = (msg_type in ("display_data", "execute_result") and wire <= 2 * client.max_answer_bytes) \
                or (msg_type == "error" and index not in client.long_errors) \
                or (msg_type == "stream" and client.room(index) > 0)
            if not may_keep:
                client.note_cap(cell.outputs, index)
                return False
        why = _unparsable(parts[3:5])
        if why is not None:
            self._refuse(cell, index, record, why)
            return False
        msg = _deserialize(session, frames, scanned=True)
        if msg is None:
            return False
        if msg_type == "status":
            return msg["content"].get("execution_state") == "idle"
        if msg_type not in OUTPUTS and msg_type != "update_display_data":
            client.charge(index, wire)   # comm messages, clear_output...: counted as they come
        client.incoming_bytes = wire
        try:
            client.process_message(msg, cell, index)
        except Exception as e:  # noqa: BLE001 - an odd message (a forged comm, a bad display) is dropped
            log.debug("dropped an iopub message (%s): %s", msg_type, e)
        finally:
            client.incoming_bytes = 0
        return False

    def _refuse(self, cell, index: int, record: bool, why: str) -> None:
        """Fail cell ``index`` for a message the grader would not parse (``why``): one error output, so
        nbgrader's rule gives a test cell 0; the rest of the run goes on."""
        if not record or index in self.refused_cells:
            return
        self.refused_cells.add(index)
        evalue = f"{why}; the grader read none of it, and this cell fails"
        cell.outputs.append(nbformat.v4.new_output("error", ename="MalformedKernelMessage", evalue=evalue,
                                                   traceback=[f"MalformedKernelMessage: {evalue}"]))

    # -- the result
    def _stop(self, index: int, status: str, message: str) -> None:
        """The run ends at cell ``index`` (not run, or not finished) with this event."""
        self.events.append(CellEvent(min(index, len(self.nb.cells) - 1), status, message))
        self.stopped = index

    def _result(self, stopped: int | None, status: str | None = None, message: str | None = None) -> Execution:
        if status is None:
            status = max((e.status for e in self.events), key=SEVERITY.index) if self.events else "completed"
        return Execution(nb=self.nb, status=status, message=_summary(self.events) if message is None else message,
                         stopped_at=stopped, seconds=round(time.monotonic() - self.start, 3), events=list(self.events),
                         restarts=self.restarts)


def execute_notebook(nb: nbformat.NotebookNode, sandbox: Sandbox, *, cell_timeout: float = Settings.cell_timeout,
                     notebook_timeout: float = Settings.notebook_timeout,
                     max_output_bytes: int = Settings.max_output_bytes, max_message_bytes: int = 32 * MiB,
                     startup_timeout: float = 60, max_restarts: int = Settings.max_restarts,
                     wall_factor: float = Settings.wall_factor,
                     idle_factor: float | None = Settings.idle_factor, clock: Clock | None = None,
                     kernel_argv: tuple[str, ...] | None = None) -> Execution:
    """Execute every code cell of ``nb`` (in place) in sandboxed kernels, errors allowed (see the module).
    ``kernel_argv``: another language's installed kernel (None: course-grade's Python kernel).

    ``cell_timeout`` and ``notebook_timeout`` are CPU seconds of the sandbox, each with a wall-clock
    backstop ``wall_factor`` times larger (:class:`Budget`); the notebook may also spend at most
    ``idle_factor`` times its limit of wall-clock time waiting (None: no such allowance). ``clock``: the
    hand-in's :class:`Clock`, when its notebooks share one backstop and one allowance."""
    return _Run(nb, sandbox, cell_timeout=cell_timeout, notebook_timeout=notebook_timeout,
                max_output_bytes=max_output_bytes, max_message_bytes=max_message_bytes,
                startup_timeout=startup_timeout, max_restarts=max_restarts, wall_factor=wall_factor,
                idle_factor=idle_factor, clock=clock, kernel_argv=kernel_argv).run()


# ---- helpers -------------------------------------------------------------------------------

def _gone(kernel: Kernel, within: float) -> bool:
    """True once the kernel's process has exited, waiting at most ``within`` seconds."""
    deadline = time.monotonic() + within
    while kernel.alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _deserialize(session, frames, scanned: bool = False) -> dict | None:
    """A verified message, or None for one that is not (a forged or torn message is dropped, and so is
    one past the bounds of :func:`_unparsable`, unless ``scanned``: the caller has checked them)."""
    try:
        _, parts = session.feed_identities(frames, copy=False)
        if not scanned and _unparsable(parts[1:5]) is not None:
            return None
        return session.deserialize(parts, content=True, copy=False)
    except Exception:  # noqa: BLE001 - ValueError("Invalid Signature"), TypeError, JSON errors...
        return None


def _unparsable(parts) -> str | None:
    """Why the grader will not parse these JSON parts of a message (too deep, too many objects and arrays
    or values: :data:`MAX_MESSAGE_DEPTH`, :data:`MAX_MESSAGE_CONTAINERS`, :data:`MAX_MESSAGE_VALUES`), or
    None; read from the bytes.

    >>> _unparsable([b'{"msg_id": "1"}', b"[" * 101 + b"]" * 101])
    'a message from the kernel nests deeper than 100 levels'
    """
    for part in parts:
        try:
            shape(getattr(part, "bytes", part), max_depth=MAX_MESSAGE_DEPTH, max_containers=MAX_MESSAGE_CONTAINERS,
                  max_values=MAX_MESSAGE_VALUES)
        except TooLarge as e:
            return f"a message from the kernel {e}"
    return None


def _limit_hit(cell, before: dict, after: dict, *, with_cgroup: bool) -> str | None:
    """Which sandbox limit the cell ran into, if any (the most specific first), from what the grader
    observed: the cgroup's event counters and the disk's use. Text the kernel writes (its log, an
    error's value) decides nothing; only without a cgroup, where RLIMIT_AS and RLIMIT_NPROC make the
    cell's own code raise, is the cell's own error's type read (``MemoryError``, a failed fork).

    A limit counts for the cell that reached it: once the disk is full, the cells after the one
    that filled it may fail to write, but they did not fill it.

    >>> cell = {"outputs": [{"output_type": "error", "ename": "ValueError", "evalue": "MemoryError"}]}
    >>> _limit_hit(cell, {}, {}, with_cgroup=False) is None
    True
    >>> _limit_hit({"outputs": [dict(cell["outputs"][0], ename="MemoryError")]}, {}, {}, with_cgroup=True) is None
    True
    >>> _limit_hit(cell, {"oom_kill": 0}, {"oom_kill": 1}, with_cgroup=True)
    'memory_limit'
    """
    errors = [(str(o.get("ename", "")), str(o.get("evalue", ""))) for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    names = {ename for ename, _ in errors}
    # A fork bomb also runs the memory out (each copy of the kernel), so the process cap comes first.
    if after.get("pids_max", 0) > before.get("pids_max", 0) or (
            not with_cgroup and ("BlockingIOError" in names or any(
                ename == "RuntimeError" and evalue.startswith("can't start new thread") for ename, evalue in errors))):
        return PROCESS_LIMIT
    if after.get("oom_kill", 0) > before.get("oom_kill", 0) or (not with_cgroup and "MemoryError" in names):
        return MEMORY_LIMIT
    if not before.get("disk_full") and after.get("disk_full"):
        return DISK_LIMIT
    return None


def _limit_message(sandbox: Sandbox, name: str, status: str) -> str:
    lim = sandbox.limits
    return {MEMORY_LIMIT: f"{name} used more than the memory limit of {lim.memory_text()}",
            PROCESS_LIMIT: f"{name} hit the limit of {lim.max_processes} processes and threads",
            DISK_LIMIT: f"{name} filled the notebook's disk space: {lim.disk_text()} or {lim.max_files:,} files"}[status]


def _error_from_reply(cell, reply: dict | None) -> None:
    """Stock nbgrader's ``Execute.on_cell_executed``: a reply with status "error" whose error (by name) is
    not among the cell's outputs adds one, so a test whose traceback an IPython custom exception handler
    (``set_custom_exc``) swallowed still shows its error, and nbgrader's rule gives it 0.

    >>> cell = {"outputs": []}
    >>> _error_from_reply(cell, {"content": {"status": "error", "ename": "AssertionError", "evalue": "no"}})
    >>> [(o["output_type"], o["ename"], o["traceback"]) for o in cell["outputs"]]
    [('error', 'AssertionError', ['AssertionError: no'])]
    >>> _error_from_reply(cell, {"content": {"status": "error", "ename": "AssertionError", "evalue": "no"}})
    >>> len(cell["outputs"])
    1
    """
    content = (reply or {}).get("content") or {}
    if not isinstance(content, dict) or content.get("status") != "error":
        return
    ename, evalue = str(content.get("ename", "Error"))[:200], str(content.get("evalue", ""))[:ERROR_CHARS]
    if any(o.get("output_type") == "error" and str(o.get("ename")) == ename for o in cell.get("outputs", [])):
        return
    cell["outputs"].append(nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                                  traceback=[f"{ename}: {evalue}"[:ERROR_CHARS]]))


def _why(sandbox: Sandbox, limit: str | None) -> str:
    return "" if limit is None else "; " + _limit_message(sandbox, "it", limit)


def _summary(events: list[CellEvent], most: int = 4) -> str:
    parts = [e.message for e in events[:most]]
    if len(events) > most:
        parts.append(f"and {len(events) - most} more")
    return "; ".join(parts)


def _one_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def _cell_name(nb, index: int | None) -> str:
    if index is None:
        return "kernel start-up"
    if index >= len(nb.cells):
        return "the end of the notebook"
    gid = grade_id(nb.cells[index])
    return f"cell {index + 1}" + (f" ({gid})" if gid else "")
