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
from typing import IO

import nbformat
from course_lib.units import KiB, MiB

from ..contract.answers import ANSWER_MIME
from ..contract.cells import grade_id
from ..contract.jsonshape import TooLarge, shape
from ..contract.results import DISK_LIMIT, KERNEL_DIED, MEMORY_LIMIT, PROCESS_LIMIT, SEVERITY, TIMEOUT
from ..sandbox import Sandbox, fork_server
from ..sandbox.forkserver import ForkedProcess, ForkServerError
from ..contract.settings import Settings
from ..contract.text import one_line

KERNEL_NAME = "course-grade-sandbox"
#: A fresh kernel's program (``python -P -s -c``): ipykernel_launcher's, with '' on sys.path before the first
#: site-packages, as IPython's init_path puts it in a kernel started in the notebook's folder (``-P`` keeps the
#: folder off sys.path while ipykernel loads, and makes init_path skip it): a module beside the notebook
#: imports. The fork server does the same (sandbox/_zygote.py ``_cwd_on_path``).
KERNEL_MAIN = ("import importlib.util, os, sys\n"
               "sys.argv[0] = importlib.util.find_spec('ipykernel_launcher').origin\n"
               "sys.path.insert(next((i for i, p in enumerate(sys.path)\n"
               "                      if os.path.basename(p) in ('site-packages', 'dist-packages')), 0), '')\n"
               "from ipykernel import kernelapp\n"
               "kernelapp.launch_new_instance()\n")
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


# ---- the kernel ----------------------------------------------------------------------------

def kernel_args(sandbox: Sandbox) -> list[str]:
    """What every grading kernel is started with: no history database (nothing of it is graded, and
    it costs a sqlite write per cell), and IPython's files from the sandbox's $IPYTHONDIR, which is
    the grader's and read-only inside (see Sandbox): no startup file or config of a learner runs."""
    return ["--HistoryManager.enabled=False", "--InteractiveShellApp.exec_PYTHONSTARTUP=False",
            # ipykernel sleeps 0.5 ms after every cell "so that the IOPub messages go out" before
            # the reply; the grader waits for the kernel's idle status on IOPub anyway (_Run)
            "--Kernel._execute_sleep=0",
            # figures as PNGs deflated at zlib's fastest level: the same pixels (PNG is lossless), 0.7%
            # more bytes, ~6 ms less per figure (~12 ms a notebook; git log -p benchmarks/RESULTS.md, 2026-12-01);
            # bbox_inches="tight" is the inline backend's own default, kept
            '--InlineBackend.print_figure_kwargs={"bbox_inches": "tight", "pil_kwargs": {"compress_level": 1}}',
            f"--ipython-dir={sandbox.ipython_dir}"]


class Kernel:
    """One sandboxed kernel and our sockets to it (from :func:`start_kernel`).

    ``process`` is what started it: jupyter_client's KernelManager (a fresh Python under
    bubblewrap) or a :class:`~autograder.forkserver.ForkedProcess` (forked by the fork server).
    """

    def __init__(self, km, kc, context, log_offset: int, process=None):
        self.km, self.kc, self.context, self.process = km, kc, context, process
        self.log_offset = log_offset
        """Where this kernel's part of the sandbox's kernel.log starts."""
        self.shell = kc.shell_channel.socket if kc is not None else None
        self.iopub = kc.iopub_channel.socket if kc is not None else None
        self.iopub_monitor = None
        """Tells when ZeroMQ dropped the IOPub connection (a message over the size limit): see
        :meth:`reconnect_iopub`."""

    def watch_iopub(self) -> None:
        import zmq
        self.iopub_monitor = self.iopub.get_monitor_socket(zmq.EVENT_DISCONNECTED)

    def iopub_dropped(self) -> bool:
        """True when the monitor says the IOPub connection was dropped (reads its pending events)."""
        import zmq
        from zmq.utils.monitor import recv_monitor_message

        dropped = False
        while self.iopub_monitor is not None and self.iopub_monitor.poll(0):
            try:
                dropped |= recv_monitor_message(self.iopub_monitor, zmq.NOBLOCK)["event"] == zmq.EVENT_DISCONNECTED
            except zmq.ZMQError:
                break
        return dropped

    def reconnect_iopub(self) -> None:
        """A fresh IOPub socket: ZeroMQ never reconnects one that dropped a message over the size limit."""
        old = self.iopub
        try:
            old.disable_monitor()
        except Exception:  # noqa: BLE001
            pass
        if self.iopub_monitor is not None:
            self.iopub_monitor.close(linger=0)
        old.close(linger=0)
        self.iopub = self.kc.connect_iopub(identity=self.kc.session.bsession)
        self.watch_iopub()

    def alive(self) -> bool:
        try:
            return self.process.alive() if self.process is not None else bool(self.km.is_alive())
        except Exception:  # noqa: BLE001 - a manager in a bad state is a dead kernel
            return False

    def interrupt(self) -> None:
        """An interrupt_request on the control channel: ipykernel raises KeyboardInterrupt in the cell.
        (A SIGINT to the launched process would reach bubblewrap and kill the sandbox.)"""
        try:
            self.kc.control_channel.send(self.kc.session.msg("interrupt_request", content={}))
        except Exception as e:  # noqa: BLE001
            log.debug("interrupt failed: %s", e)

    def close(self) -> None:
        """Kill the kernel at once and close every socket (the sandbox's other processes: the caller)."""
        try:
            if self.kc is not None:
                self.kc.stop_channels()
        except Exception:  # noqa: BLE001
            pass
        try:
            if self.process is not None:
                self.process.close()
            elif self.km.has_kernel:
                self.km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001
            pass
        try:
            self.km.cleanup_resources()
        except Exception:  # noqa: BLE001
            pass
        if self.iopub_monitor is not None:
            self.iopub_monitor.close(linger=0)
        self.context.destroy(linger=0)


def start_kernel(sandbox: Sandbox, *, startup_timeout: float, max_message_bytes: int,
                 log_file: IO[bytes], kernel_argv: tuple[str, ...] | None = None) -> Kernel:
    """Start an IPython kernel inside ``sandbox`` and wait until it answers (raises RuntimeError).

    The one place that starts a kernel: the first one, and every fresh one after a failure.
    Where the probe found the fork server works (``sandbox.isolation.kernels == "fork"``), the
    kernel is forked from this batch's server; else (or if the server is gone) it is a fresh
    Python under bubblewrap. Either way it runs with :func:`kernel_args`, in the same isolation.
    ``kernel_argv``: another language's installed kernel (:mod:`autograder.source.kernels`), run under bubblewrap.
    Once it answers, before any learner code runs, its socket folder is sealed
    (:meth:`~autograder.sandbox.box.Sandbox.seal_sockets`): every later connection the grader makes
    goes to the kernel's own sockets, never to a path learner code replaced.
    """
    kernel = _start_kernel(sandbox, startup_timeout=startup_timeout, max_message_bytes=max_message_bytes,
                           log_file=log_file, kernel_argv=kernel_argv)
    try:
        sandbox.seal_sockets()
    except OSError:
        kernel.close()
        raise
    return kernel


def _start_kernel(sandbox: Sandbox, *, startup_timeout: float, max_message_bytes: int,
                  log_file: IO[bytes], kernel_argv: tuple[str, ...] | None = None) -> Kernel:
    import zmq
    from jupyter_client import KernelManager

    context = zmq.Context()
    # Messages larger than this are dropped by ZeroMQ before Python ever sees them.
    context.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
    # The client connects before the forked kernel has bound its sockets; ZeroMQ then retries every
    # RECONNECT_IVL (100 ms by default), which left each kernel start ~0.1 s idle (0.17 s -> 0.06 s).
    context.setsockopt(zmq.RECONNECT_IVL, 5)
    log_file.flush()
    offset = log_file.tell()
    if kernel_argv is not None:
        return _start_exec(sandbox, context, offset, startup_timeout, log_file, kernel_argv)
    server = fork_server(sandbox.pythonpath, sandbox.preload, sandbox.python) \
        if sandbox.isolation.kernels == "fork" else None
    if server is not None:
        km = KernelManager(context=context, transport="ipc", ip=str(sandbox.run_dir / "k"),
                           connection_file=str(sandbox.run_dir / "kernel.json"))
        km.write_connection_file()
        try:
            process = ForkedProcess(*server.spawn(sandbox.fork_request([*kernel_args(sandbox), "-f", km.connection_file]),
                                                  [log_file.fileno()]))
        except ForkServerError as e:
            log.warning("the fork server could not fork a kernel (%s); starting a fresh Python instead", e)
            km.cleanup_resources()
        else:
            from jupyter_client.blocking import BlockingKernelClient
            kc = BlockingKernelClient(context=context, session=km.session)
            kc.load_connection_info(km.get_connection_info())
            return _ready(Kernel(km, kc, context, offset, process), startup_timeout)
    return _start_exec(sandbox, context, offset, startup_timeout, log_file)


def _start_exec(sandbox: Sandbox, context, offset: int, startup_timeout: float, log_file: IO[bytes],
                kernel_argv: tuple[str, ...] | None = None) -> Kernel:
    """A fresh Python (or ``kernel_argv``, another language's kernel) under bubblewrap and the launcher,
    through jupyter_client's KernelManager."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    name = KERNEL_NAME if kernel_argv is None else f"{KERNEL_NAME}-other"
    spec_dir = sandbox.root / "kernels" / name
    if not (spec_dir / "kernel.json").is_file():
        spec_dir.mkdir(parents=True, exist_ok=True)
        argv = sandbox.command(list(kernel_argv) if kernel_argv is not None else [
            sandbox.python, "-P", "-s", "-c", KERNEL_MAIN, *kernel_args(sandbox), "-f", "{connection_file}"])
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": argv, "display_name": "Python 3 (sandboxed grader)", "language": "python",
            "interrupt_mode": "message", "metadata": {"debugger": False}}))
    ksm = KernelSpecManager(kernel_dirs=[str(sandbox.root / "kernels")])
    km = KernelManager(kernel_name=name, kernel_spec_manager=ksm, context=context, transport="ipc",
                       ip=str(sandbox.run_dir / "k"), connection_file=str(sandbox.run_dir / "kernel.json"))
    try:
        km.start_kernel(stdout=log_file, stderr=log_file)
    except BaseException:
        Kernel(km, None, context, offset).close()
        raise
    return _ready(Kernel(km, km.client(context=context), context, offset), startup_timeout)


def _ready(kernel: Kernel, timeout: float) -> Kernel:
    """Start ``kernel``'s channels and wait for its kernel_info reply and a first IOPub message, as
    jupyter_client's wait_for_ready does, but asking :meth:`Kernel.alive` whether it died meanwhile."""
    from queue import Empty

    try:
        kc = kernel.kc
        kc.start_channels(hb=False)
        deadline = time.monotonic() + timeout
        while True:
            kc.kernel_info()
            try:
                msg = kc.get_shell_msg(timeout=min(1.0, max(0.05, deadline - time.monotonic())))
            except Empty:
                pass
            else:
                if msg["msg_type"] == "kernel_info_reply":
                    try:
                        kc.get_iopub_msg(timeout=0.2)   # IOPub is connected too
                    except Empty:
                        pass
                    else:
                        kernel.watch_iopub()
                        return kernel
            if not kernel.alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")
    except BaseException:
        kernel.close()
        raise


# ---- outputs -------------------------------------------------------------------------------

def _text_size(content: dict) -> int:
    if "text" in content:
        return len(content["text"])
    if "data" in content:
        return sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in content["data"].values())
    if "traceback" in content:
        return sum(len(t) for t in content["traceback"]) + len(content.get("evalue", ""))
    return 0


def _make_client_class():
    from nbclient import NotebookClient

    class CappedClient(NotebookClient):
        """nbclient's output model (display ids, clear_output, widgets) with an output budget.

        Only :meth:`process_message` and what it calls are used: the cells are driven by
        :class:`_Run`. Streams past the budget keep their first bytes; answers have a budget
        of their own; errors are always kept, their tracebacks shortened past the budget.
        """

        store_widget_state = False   # widgets are shown as a note: no state kept, however many comm messages
        max_output_bytes = 1 * MiB
        max_answer_bytes = 64 * KiB
        max_answers = 64
        cell_allowance_bytes = 2 * KiB
        """What every cell may show even once the notebook's budget is spent (a line or two)."""

        def reset_execution_trackers(self) -> None:
            super().reset_execution_trackers()
            self.output_bytes = 0
            self._cell_bytes: dict[int, int] = {}
            self._answers = 0
            self._truncated_cells: set[int] = set()
            self._pending_note = None
            self.long_errors: set[int] = set()
            """Cells that already kept an error past the budget (a cell raises once; a flood sends many)."""
            self.incoming_bytes = 0
            """The whole serialized size of the message being processed (set by :class:`_Run`)."""

        def room(self, cell_index: int) -> int:
            """Bytes cell ``cell_index`` may still show."""
            return max(self.max_output_bytes - self.output_bytes,
                       self.cell_allowance_bytes - self._cell_bytes.get(cell_index, 0))

        def charge(self, cell_index: int, size: int) -> None:
            """Count ``size`` bytes against the notebook's budget and the cell's allowance."""
            self.output_bytes += size
            self._cell_bytes[cell_index] = self._cell_bytes.get(cell_index, 0) + size

        def output(self, outs, msg, display_id, cell_index):
            content = msg.get("content", {})
            # Every byte of the message counts: its header, metadata and content, not only the text
            # (a display's metadata, an error's evalue and traceback are the learner's to fill).
            size = max(self.incoming_bytes, _text_size(content))
            data = content.get("data") or {}
            if ANSWER_MIME in data:
                if size > self.max_answer_bytes or self._answers >= self.max_answers:
                    self.note_truncated(outs, cell_index, "answer output dropped: too large or too many")
                    return None
                self._answers += 1
                return super().output(outs, msg, display_id, cell_index)
            room = self.room(cell_index)
            if size > room:
                kind = msg.get("msg_type")
                text = content.get("text", "") if kind == "stream" else ""
                keep = room - max(0, size - len(text))   # what is left for text once the rest is counted
                if kind == "stream" and keep > 0:
                    content["text"] = text[:keep]
                    size = room
                elif kind == "error" and cell_index not in self.long_errors:
                    # Kept, shortened: it says why a test failed. One per cell: the others are a flood.
                    self.long_errors.add(cell_index)
                    content["ename"] = str(content.get("ename", ""))[:200]
                    content["evalue"] = str(content.get("evalue", ""))[:ERROR_CHARS]
                    content["traceback"] = [str(line)[:ERROR_CHARS] for line in (content.get("traceback") or [])[-3:]]
                    size = 0
                else:
                    self.note_cap(outs, cell_index)
                    return None
                self.note_cap(outs, cell_index, after=True)
            self.charge(cell_index, size)
            return super().output(outs, msg, display_id, cell_index)

        def _update_display_id(self, display_id, msg):
            content = msg.get("content", {})
            if ANSWER_MIME in (content.get("data") or {}):
                return  # answers are never updated in place
            # The update is written into every output that has this display id: each copy counts.
            copies = sum(len(indices) for indices in self._display_id_map.get(display_id, {}).values())
            cost = copies * max(self.incoming_bytes, _text_size(content))
            index = next(iter(self._display_id_map.get(display_id, {})), None)
            if index is None or cost > self.max_output_bytes - self.output_bytes:
                return
            self.charge(index, cost)
            super()._update_display_id(display_id, msg)

        def note_cap(self, outs, cell_index, after: bool = False):
            why = f"output truncated: the notebook printed more than {self.max_output_bytes // KiB} KiB"
            if after:  # the note follows the part that was kept
                self._pending_note = (outs, cell_index, why)
            else:
                self.note_truncated(outs, cell_index, why)

        def note_later(self, outs, cell_index, why):
            """A note that goes after what the cell shows (at most one per cell)."""
            if self._pending_note is None:
                self._pending_note = (outs, cell_index, why)

        def flush_note(self):
            pending = self._pending_note
            if pending is not None:
                self._pending_note = None
                self.note_truncated(*pending)

        def note_truncated(self, outs, cell_index, why):
            """The grader's note, on stdout: scoring never reads it (nbgrader's rule gives 0 to a test cell with
            an error or anything on stderr, nbgrader 0.9.6 nbgrader/utils.py determine_grade), so the cap
            costs no points by itself."""
            if cell_index not in self._truncated_cells:
                self._truncated_cells.add(cell_index)
                outs.append(nbformat.v4.new_output("stream", name="stdout", text=f"[{why}]\n"))

    return CappedClient


#: Characters of an error's value and of each traceback line kept once the output budget is spent.
ERROR_CHARS = 2000
#: Output messages: the ones the budget's own rules in CappedClient.output handle.
OUTPUTS = ("stream", "display_data", "execute_result", "error")


# ---- the clock -----------------------------------------------------------------------------

@dataclass
class Clock:
    """The wall clock and the idle time of one hand-in, shared by the budgets of all its notebooks, so
    that the wall-clock backstop and the idle allowance bound the hand-in as a whole (one notebook's
    worth), not each notebook anew (a hand-in whose notebooks each wait to their own backstop would
    hold a worker for their sum). A budget made without one has a clock of its own."""

    wall0: float = field(default_factory=time.monotonic)
    """When the hand-in's first notebook started."""
    idle_s: float = 0.0
    """Wall-clock seconds the hand-in's notebooks have spent waiting so far (:meth:`Budget.account`)."""
    notebooks: int = 1
    """How many notebooks share it (what the messages say)."""


class Budget:
    """A time limit in CPU seconds of the sandbox, with a wall-clock backstop ``wall_factor`` times larger,
    and (``idle_factor``, for the notebook) an idle allowance: wall-clock seconds in which the sandbox
    waited. The backstop and the allowance run on a :class:`Clock`, the hand-in's where one is given.

    Waiting is judged in windows of :meth:`idle_window_s` (5 s at the default limits). In each, the
    sandbox's processes were busy (running, or ready to run and queued for a core: their CPU time plus
    ``run_delay`` of ``/proc/PID/task/TID/schedstat``, Sandbox.runqueue_seconds) or asleep (a ``sleep``,
    a blocked read) the rest of the time; when they slept for most of the window (busy under
    :attr:`IDLE_SHARE` of it) the time they slept counts as waiting. A cell that works 40 ms in every
    240 ms (17% of a core) mostly waits, and 83% of its time counts; a kernel starved by a busy host is
    queued for a core when it is not running, so it is busy, not waiting. Where the queue time cannot be
    read, a starved kernel cannot be told from a waiting one, and only windows under
    :attr:`CPU_ONLY_IDLE_SHARE` of a core count (whole).

    CPU time is what a cell costs whatever else the machine runs (a busy grading host gives the kernel
    less of a core, not less work done per CPU second); the backstop ends what uses no CPU at all (a
    ``sleep``, a blocked read). Where the sandbox has no CPU clock (no cgroup and no throwaway uid,
    ``--insecure`` only), the limit is wall-clock time, as it was.

    >>> class Box:   # a sandbox whose processes have used 7 CPU seconds, then 12
    ...     readings = iter([7.0, 12.0])
    ...     def cpu_seconds(self): return next(self.readings)
    >>> budget = Budget(Box(), 5, wall_factor=4)
    >>> budget.over()
    'cpu'

    Waiting is not free: a notebook that sleeps holds a grading worker. With an idle allowance of 1 times
    a 5 s limit (windows of 1.25 s), 3 s of work (3 CPU seconds) then 6 s of sleep (no CPU) is over it;
    the work is not waiting:

    >>> class Sleeper:
    ...     def cpu_seconds(self): return 0.0
    >>> budget = Budget(Sleeper(), 5, wall_factor=4, idle_factor=1)
    >>> budget.account(budget.wall0 + 3, 3.0); budget.idle_used()
    0.0
    >>> budget.account(budget.wall0 + 9, 3.0); budget.idle_used(), budget.over()
    (6.0, 'idle')

    A window of 1 CPU second and 2 s queued for a core (a starved kernel) is not waiting; one of 0.5 CPU
    seconds in 3 s (a cell that works a little, then sleeps) waited 2.5 s:

    >>> class Queued:
    ...     def cpu_seconds(self): return 0.0
    ...     def runqueue_seconds(self): return 0.0
    >>> budget = Budget(Queued(), 5, wall_factor=4, idle_factor=1)
    >>> budget.account(budget.wall0 + 3, 1.0, queued=2.0); budget.idle_used()
    0.0
    >>> budget.account(budget.wall0 + 6, 1.5, queued=2.0); budget.idle_used()
    2.5

    Two notebooks on one clock share one backstop and one allowance:

    >>> clock = Clock(notebooks=2)
    >>> first = Budget(Sleeper(), 5, wall_factor=4, idle_factor=1, clock=clock)
    >>> first.account(first.wall0 + 4, 0.0)
    >>> second = Budget(Sleeper(), 5, wall_factor=4, idle_factor=1, clock=clock)
    >>> second.idle_used(), second.wall_s
    (4.0, 20)
    """

    #: Seconds a CPU reading is reused (the uid fallback walks /proc).
    READ_EVERY_S = 0.05
    #: The longest window waiting is judged over, and the shortest (the uid fallback's clock ticks are 10 ms).
    IDLE_WINDOW_S, MIN_IDLE_WINDOW_S = 5.0, 1.0
    #: A window in which the sandbox ran or was queued to run for less than this share of it mostly waited.
    IDLE_SHARE = 0.5
    #: The same where the queue time cannot be read: a window under this share of a core counts whole.
    CPU_ONLY_IDLE_SHARE = 0.02

    def __init__(self, sandbox, cpu_s: float, wall_factor: float, idle_factor: float | None = None,
                 clock: Clock | None = None):
        self.sandbox, self.cpu_s, self.wall_s = sandbox, cpu_s, cpu_s * wall_factor
        self.idle_s = None if idle_factor is None else cpu_s * idle_factor
        """Wall-clock seconds the sandbox may spend waiting (None: no idle allowance)."""
        self.clock = clock or Clock()
        self.wall0 = time.monotonic()
        self.cpu0 = sandbox.cpu_seconds()
        self.measured = self.cpu0 is not None
        if not self.measured:
            self.wall_s = cpu_s
            self.clock = Clock(self.wall0, self.clock.idle_s, self.clock.notebooks)   # its own: wall time is its limit
        self._read_at, self._cpu = self.wall0, self.cpu0
        self._window = (self.wall0, self.cpu0, self._queued())

    def idle_window_s(self) -> float:
        """A quarter of the idle allowance, within [MIN_IDLE_WINDOW_S, IDLE_WINDOW_S]: a short allowance
        (a test's) is judged in short windows."""
        return min(self.IDLE_WINDOW_S, max(self.MIN_IDLE_WINDOW_S, (self.idle_s or 0) / 4))

    def _queued(self) -> float | None:
        if self.idle_s is None:
            return None
        read = getattr(self.sandbox, "runqueue_seconds", None)
        return read() if read is not None else None

    def cpu_used(self) -> float:
        if not self.measured:
            return time.monotonic() - self.wall0
        now = time.monotonic()
        if now - self._read_at >= self.READ_EVERY_S or self._cpu == self.cpu0:
            cpu = self.sandbox.cpu_seconds()
            if cpu is not None:
                self._cpu, self._read_at = cpu, now
                self.account(now, cpu)
        return self._cpu - self.cpu0

    def account(self, now: float, cpu: float, queued: float | None = None) -> None:
        """Count the time the sandbox slept in the window since the last one as waiting (on the clock), if it
        slept for most of it. ``queued``: the sandbox's queue time now (None: read it)."""
        start, cpu_then, queued_then = self._window
        if self.idle_s is None or now - start < self.idle_window_s():
            return
        queued = self._queued() if queued is None else queued
        window, busy = now - start, cpu - cpu_then
        if queued is not None and queued_then is not None:
            busy += max(0.0, queued - queued_then)   # a thread that exited takes its queue time with it
            if busy < self.IDLE_SHARE * window:
                self.clock.idle_s += window - busy
        elif busy < self.CPU_ONLY_IDLE_SHARE * window:
            self.clock.idle_s += window
        self._window = (now, cpu, queued)

    def wall_used(self) -> float:
        return time.monotonic() - self.clock.wall0

    def idle_used(self) -> float:
        """Wall-clock seconds in which the sandbox (the hand-in, on a shared clock) waited: slept or blocked
        on a read, in windows where it did so most of the time."""
        return self.clock.idle_s

    def over(self) -> str | None:
        """"cpu" once the CPU seconds are used, "wall" once the backstop has passed, "idle" once the idle
        allowance is spent, else None."""
        if self.cpu_used() >= self.cpu_s:
            return "cpu"
        if self.wall_used() >= self.wall_s:
            return "wall"
        if self.idle_s is not None and self.idle_used() >= self.idle_s:
            return "idle"
        return None

    def wall_left(self) -> float:
        """Wall-clock seconds before the backstop or the idle allowance (for start-up timeouts)."""
        left = self.wall_s - self.wall_used()
        if self.idle_s is not None:
            left = min(left, self.idle_s - self.idle_used())
        return max(0.0, left)


# ---- one run of a notebook -----------------------------------------------------------------

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
