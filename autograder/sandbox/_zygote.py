"""The kernel fork server: import ipykernel, numpy, matplotlib and the course library once, then fork
each submission's kernel into a sandbox of its own.

This file is run as a script, as root, by :mod:`autograder.forkserver`::

    python -P -s _zygote.py SOCKET [MODULE]...

with the environment a sandboxed kernel starts with. It listens on the Unix socket SOCKET (in a
root-only folder), imports the MODULEs, freezes them for the cycle collector (forked kernels then
share those pages instead of copying them), prints ``ready`` and serves the requests that came
meanwhile and later. It imports nothing of the
grader and is never given anything a learner may not see: no answers, no other hand-in, only
where a sandbox is and what it may use (see the request below). It stops at end of input on its
stdin (every grader process that holds the pipe is gone), at an ``exit`` request, or when its
parent dies; it then kills every kernel it forked. When a client's connection closes (a worker
died), the kernels forked for it are killed.

Each kernel is three processes, as under bubblewrap (bwrap, its init, the program), and every
step bubblewrap and ``_launch.py`` take is taken again here, before any learner code runs:

1. the **monitor** (forked from this server) dies with it (PR_SET_PDEATHSIG), joins the
   submission's memory and pids cgroups, unshares new mount, pid, ipc, uts, network and cgroup
   namespaces, forks the init and exits with its status;
2. the **init** (pid 1 of the new pid namespace) dies with the monitor, starts a new session,
   builds the file system from the request's mount plan (the same plan bubblewrap is given:
   read-only system, Python and course library, the scratch folders read-write, a fresh /proc and
   /dev; :func:`autograder.sandbox.mounts.mount_plan`), pivots into it, sets the hostname, brings
   up the loopback device, forks the kernel and reaps every orphan until the kernel exits;
3. the **kernel** (pid 2) hands the scratch folders to the throwaway uid, drops every group and
   becomes that uid (so it holds no capability), sets no_new_privs and the rlimits (the
   launcher's own routines, ``_launch.py``, loaded by path), dies with the init, takes exactly the
   request's environment and working folder, and runs ipykernel in this process (``mode:
   kernel``, with ``kernel_tweaks.py``'s two shortcuts) or execs a program (``mode: exec``).

A step that fails writes ``sandbox launcher: ...`` to the kernel's log and exits with status 97,
as the launcher does.

Request (JSON, one datagram, with file descriptors by SCM_RIGHTS, named by ``fds``: ``output``
for the program's stdout and stderr, or ``stdout`` and ``stderr``, and optionally ``status``, a
pipe to which the monitor writes the program's returncode as subprocess gives it)::

    {"mode": "kernel" | "exec", "argv": [...], "fds": ["output"], "cgroup_procs": [...],
     "plan": [{"kind": "bind", "source": ..., "path": ..., "writable": false}, ...],
     "stage": ROOT/mnt, "hostname": "sandbox", "chown": [...],
     "uid": N | null, "rlimits": [[NAME, VALUE], ...], "env": {...}, "cwd": DIR, "loopback": true}

Reply: ``{"pid": MONITOR_PID}`` with a pidfd of the monitor (SCM_RIGHTS), or ``{"error": "..."}``.
"""

import ctypes
import gc
import importlib
import json
import os
import platform
import re
import selectors
import signal
import socket
import sys
import traceback

FAILED = 97
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 1024, 2048, 4096, 16384
MS_PRIVATE, MS_SLAVE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 19, 1 << 21, 1 << 24
MNT_DETACH = 2
#: mountinfo's per-mount options, as mount(2) flags (kept when a bind is remounted read-only)
MOUNT_OPTIONS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                 "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
#: What bubblewrap's --dev puts in /dev (device nodes bound from the host, then links).
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {"stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
             "fd": "/proc/self/fd", "core": "/proc/kcore", "ptmx": "pts/ptmx"}
#: What bubblewrap's --proc covers read-only.
PROC_COVERED = ("sys", "sysrq-trigger", "irq", "bus")
MAX_REQUEST_BYTES = 1 << 20
#: What the preloaded modules set in os.environ as they were imported (ipykernel's debugger sets one).
_PRELOAD_ENVIRON = {}

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    pass


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags, data=None):
    _check(_libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                       ctypes.c_ulong(flags), data.encode() if data else None),
           f"mount {fstype or source or ''} on {target}")


def _sibling(name):
    """A file of this folder, loaded by path (this server imports nothing of the grader as a package)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_course_grade_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The launcher's privilege drop and rlimits (the one routine for both ways a kernel starts), and the
#: kernel's shortcuts that are checked against IPython itself.
_launch = _sibling("_launch")
_tweaks = _sibling("kernel_tweaks")
_fail = _launch._fail


# ---- the file system -------------------------------------------------------------------------

def _mounts_under(path):
    """(mount point, flags) of every mount at or below ``path``, from /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split(" - ")[0].split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            if point == path or point.startswith(path.rstrip("/") + "/"):
                flags = 0
                for option in fields[5].split(","):
                    flags |= MOUNT_OPTIONS.get(option, 0)
                out.append((point, flags))
    return out


def _bind(source, target, read_only):
    """bubblewrap's --bind / --ro-bind: recursive, nosuid and nodev, every mount below read-only too."""
    source = os.path.realpath(source)
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    _mount(source, target, None, MS_BIND | MS_REC)
    extra = MS_NOSUID | MS_NODEV | (MS_RDONLY if read_only else 0)
    for point, flags in _mounts_under(target):
        _mount(None, point, None, MS_REMOUNT | MS_BIND | flags | extra)


def _dev(target):
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for name in DEV_NODES:
        node = os.path.join(target, name)
        os.close(os.open(node, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(f"/dev/{name}", node, None, MS_BIND)
        _mount(None, node, None, MS_REMOUNT | MS_BIND | MS_NOSUID)
    for name in ("shm", "pts"):
        os.mkdir(os.path.join(target, name), 0o755)
    _mount("devpts", os.path.join(target, "pts"), "devpts", MS_NOSUID | MS_NOEXEC,
           "newinstance,ptmxmode=0666,mode=620")
    for name, to in DEV_LINKS.items():
        os.symlink(to, os.path.join(target, name))


def _proc(target):
    os.makedirs(target, mode=0o555, exist_ok=True)
    _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_COVERED:
        path = os.path.join(target, name)
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _build_root(stage, plan):
    """Make the plan's file system at ``stage`` and pivot into it (the init does this, as pid 1).

    ``plan``: :func:`autograder.sandbox.mounts.mount_plan`'s steps, as their ``wire()`` dicts."""
    if SYS_PIVOT_ROOT is None:
        raise SetupError(f"pivot_root is not known on {platform.machine()}")
    _mount(None, "/", None, MS_REC | MS_SLAVE)   # nothing we mount here reaches the host
    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    os.umask(0)
    for step in plan:
        kind, path = step["kind"], stage + step["path"]
        if kind == "dir":
            os.makedirs(path, mode=step["mode"], exist_ok=True)
            os.chmod(path, step["mode"])
        elif kind == "bind":
            _bind(step["source"], path, read_only=not step["writable"])
        elif kind == "tmpfs":
            os.makedirs(path, mode=0o755, exist_ok=True)
            size = f",size={step['size_bytes']}" if step["size_bytes"] else ""
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={step['mode']:o}{size}")
        elif kind == "proc":
            _proc(path)
        elif kind == "dev":
            os.makedirs(path, mode=0o755, exist_ok=True)
            _dev(path)
        else:
            raise SetupError(f"unknown mount step {kind!r}")
    os.chdir(stage)
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755")


def _loopback_up():
    """An empty network namespace with its loopback device up, as bubblewrap leaves it."""
    import fcntl
    import struct
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sh14x", b"lo", 0))
        flags = struct.unpack("16sh14x", ifreq)[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))


# ---- the three processes of a kernel ----------------------------------------------------------

def _close_fds(keep):
    for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _exit_code(status):
    """subprocess's returncode: the exit status, or minus the signal that ended the process."""
    return os.waitstatus_to_exitcode(status)


def _exit_like(status):
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _oom_score_adj(value):
    """Best effort: lowering it needs CAP_SYS_RESOURCE, which a container may not grant."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(value))
    except OSError:
        pass


def _monitor(req, fds, server_pid):
    """Step 1 (see the module): cgroups, namespaces, the init; exits with the init's status (and
    writes it to the request's status pipe, if it has one)."""
    signal.set_wakeup_fd(-1)            # the server's, on a descriptor closed below
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    stdout, stderr, status_fd = fds["stdout"], fds["stderr"], fds.get("status")
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    if status_fd is not None:
        status_fd = os.dup2(status_fd, 3)
    _close_fds(keep=(3,) if status_fd is not None else ())
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server_pid:
        os._exit(FAILED)
    _oom_score_adj(-1000)   # where allowed: the OOM killer then never picks the monitor or the init (their pages are shared)
    for procs in req.get("cgroup_procs", []):
        try:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:
            _fail(f"could not join cgroup {procs}: {e}")
    try:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
                             | CLONE_NEWCGROUP), "unshare the namespaces")
    except SetupError as e:
        _fail(str(e))
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        if status_fd is not None:
            os.close(status_fd)
        _run(_init, req, alive_r)
    os.close(alive_r)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        if status_fd is not None:
            try:
                os.write(status_fd, str(_exit_code(status)).encode())
            except OSError:
                pass
        _exit_like(status)


def _init(req, alive_r):
    """Step 2: pid 1 of the new pid namespace; the file system; the kernel; reaps until it exits."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    import select
    if select.select([alive_r], [], [], 0)[0]:   # readable = end of file: the monitor is already gone
        os._exit(FAILED)
    os.setsid()
    try:
        _build_root(req["stage"], req["plan"])
        name = req.get("hostname", "sandbox").encode()
        _check(_libc.sethostname(name, len(name)), "sethostname")
        if req.get("loopback", True):
            _loopback_up()
    except (SetupError, OSError) as e:
        _fail(f"could not build the sandbox: {e}")
    pid = os.fork()
    if pid == 0:
        os.close(alive_r)
        _run(_kernel, req)
    while True:
        try:
            child, status = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(FAILED)
        if child == pid:
            _exit_like(status)


def _kernel(req):
    """Step 3: the throwaway uid, the rlimits, the environment; then ipykernel, in this process."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != 1:
        os._exit(FAILED)
    uid = req.get("uid")
    _oom_score_adj(0)                   # as any process; the learner cannot lower it again
    if uid is not None:
        _launch.drop_privileges(uid, req.get("chown", []))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _launch.set_rlimits(req.get("rlimits", []))
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # the uid change cleared it
    if os.getppid() != 1:
        os._exit(FAILED)
    os.umask(0o077)
    try:
        os.chdir(req["cwd"])
    except OSError as e:
        _fail(f"could not enter {req['cwd']}: {e}")
    for sig in (signal.SIGXFSZ, signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = {str(k): str(v) for k, v in req.get("env", {}).items()}
    argv = [str(a) for a in req["argv"]]
    if req.get("mode") == "exec":
        try:
            os.execve(argv[0], argv, env)
        except OSError as e:
            _fail(f"could not run {argv[0]}: {e}")
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(_PRELOAD_ENVIRON)   # as the imports would have set them in a fresh kernel
    _fresh_process_state()
    _cwd_on_path()
    import importlib.util
    sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin] + argv
    from ipykernel.kernelapp import IPKernelApp
    app = IPKernelApp.instance()
    _tweaks.plain_compiler(app)
    app.initialize(argv)
    _tweaks.python_skips_token_transforms(app.kernel.shell.input_transformer_manager)
    if "ipywidgets" in sys.modules:   # what importing ipywidgets in a kernel does (it was imported before one existed)
        sys.modules["ipywidgets"].register_comm_target()
    app.start()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _cwd_on_path():
    """'' on sys.path before the first site-packages, where IPython's ``InteractiveShellApp.init_path`` puts it
    in a kernel started the ordinary way in the notebook's folder (``python -m ipykernel_launcher``; IPython
    9.19 IPython/core/shellapp.py): a module released beside the notebook imports. This server runs with
    ``-P`` (sys.flags.safe_path), for which init_path adds nothing. The course library, on $PYTHONPATH,
    stays ahead of it."""
    if "" in sys.path:
        return
    index = next((i for i, p in enumerate(sys.path) if os.path.basename(p) in ("site-packages", "dist-packages")), 0)
    sys.path.insert(index, "")


def _fresh_process_state():
    """What a Python started in the sandbox would have, where the server's imports kept their own."""
    import importlib
    import tempfile
    sys.path_importer_cache.clear()     # directory listings made outside the sandbox
    importlib.invalidate_caches()
    tempfile.tempdir = None              # $TMPDIR is the sandbox's now
    mpl = sys.modules.get("matplotlib")
    if mpl is not None:                  # its config and cache folders: read from $MPLCONFIGDIR again
        for name, fmt in (("get_configdir", "CONFIGDIR=%s"), ("get_cachedir", "CACHEDIR=%s")):
            fn = getattr(mpl, name, None)
            if fn is not None and hasattr(fn, "__wrapped__") and hasattr(mpl, "_logged_cached"):
                setattr(mpl, name, mpl._logged_cached(fmt, fn.__wrapped__))
    np = sys.modules.get("numpy")
    if np is not None:                   # not the server's random state (random reseeds itself at fork)
        np.random.seed()


def _run(step, *args):
    """Run one step of a forked child; it never returns to the server's loop."""
    try:
        step(*args)
    except SystemExit as e:
        os._exit(e.code if isinstance(e.code, int) else 1)
    except BaseException:  # noqa: BLE001
        try:
            os.write(2, ("sandbox launcher: " + traceback.format_exc()).encode(errors="replace"))
        except OSError:
            pass
    os._exit(FAILED)


# ---- the server ------------------------------------------------------------------------------

class Server:
    def __init__(self, path):
        self.pid = os.getpid()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path)
        os.chmod(path, 0o600)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
        self.children = {}   # monitor pid -> (pidfd, client socket)
        self.running = True
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.selector.register(self.wake_r, selectors.EVENT_READ, "reap")

    def serve(self):
        while self.running:
            for key, _ in self.selector.select(timeout=1.0):
                what = key.data
                if what == "accept":
                    conn, _ = self.listener.accept()
                    self.selector.register(conn, selectors.EVENT_READ, conn)
                elif what == "stdin":
                    if not os.read(sys.stdin.fileno(), 4096):
                        self.running = False
                elif what == "reap":
                    os.read(self.wake_r, 4096)
                else:
                    self.request(what)
            self.reap()
        for pid in list(self.children):
            self.kill(pid)

    def request(self, conn):
        try:
            data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST_BYTES, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            self.selector.unregister(conn)
            for pid, (_, owner) in list(self.children.items()):
                if owner is conn:
                    self.kill(pid)
            conn.close()
            return
        try:
            req = json.loads(data)
            if req.get("op") == "exit":
                self.running = False
                conn.send(b'{"ok": true}')
                return
            names = req.get("fds", ["output"])
            if len(fds) != len(names) or not set(names) <= {"output", "stdout", "stderr", "status"}:
                raise ValueError(f"the request names {names} but carries {len(fds)} file descriptors")
            given = dict(zip(names, fds))
            given.setdefault("stdout", given.get("output"))
            given.setdefault("stderr", given.get("output"))
            if given["stdout"] is None or given["stderr"] is None:
                raise ValueError("a request carries the program's output: 'output', or 'stdout' and 'stderr'")
            pid = os.fork()
            if pid == 0:
                _run(_monitor, req, given, self.pid)
            pidfd = os.pidfd_open(pid)
            self.children[pid] = (pidfd, conn)
            socket.send_fds(conn, [json.dumps({"pid": pid}).encode()], [pidfd])
        except Exception as e:  # noqa: BLE001 - a request we cannot serve: say why, go on
            try:
                conn.send(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
            except OSError:
                pass
        finally:
            for fd in fds:
                os.close(fd)

    def kill(self, pid):
        pidfd, _ = self.children.pop(pid)
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except OSError:
            pass
        os.close(pidfd)

    def reap(self):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            entry = self.children.pop(pid, None)
            if entry is not None:
                os.close(entry[0])


def main(argv):
    if len(argv) < 1:
        sys.stderr.write("usage: _zygote.py SOCKET [MODULE]...\n")
        return 2
    if os.geteuid() != 0:
        sys.stderr.write("the kernel fork server must run as root (it drops each kernel to a throwaway uid)\n")
        return 2
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1)   # orphaned inits are reaped here, not left as zombies
    server = Server(argv[0])                 # clients may connect now; their requests wait for the imports
    environ = dict(os.environ)
    for name in argv[1:]:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - a kernel that needs it imports it (and fails) itself
            sys.stderr.write(f"fork server: could not preload {name}: {type(e).__name__}: {e}\n")
    _PRELOAD_ENVIRON.update({k: v for k, v in os.environ.items() if environ.get(k) != v})
    gc.collect()
    gc.freeze()    # preloaded objects stay out of every later collection: forked kernels share their pages
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
