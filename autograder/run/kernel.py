"""A grading kernel in the sandbox: how it starts (forked from the batch's fork server, or a fresh
Python), the client that talks to it over ``ipc://`` sockets with an output budget, and its end.

:mod:`autograder.run.execute` drives the cells through it; everything here is about one kernel's life.
"""

from __future__ import annotations

import json
import logging
import time
from typing import IO

import nbformat
from course_lib.units import KiB, MiB

from ..contract.answers import ANSWER_MIME
from ..sandbox import Sandbox, fork_server
from ..sandbox.forkserver import ForkedProcess, ForkServerError

log = logging.getLogger(__name__)

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
