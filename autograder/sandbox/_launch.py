"""The last trusted code before learner code runs: join cgroups, drop root, set limits, exec.

This file is run as a script (``python -I _launch.py ...``), inside or outside
bubblewrap, so it imports only the standard library and never the package.

    python -I _launch.py [--cgroup-procs FILE]... [--unshare-net] [--chown PATH]...
                         [--uid N] [--rlimit NAME=VALUE]... [--env KEY=VALUE]...
                         [--chdir DIR] [--pdeathsig PARENT_PID] [--seccomp] [--hide-args N]
                         -- PROGRAM [ARGS...]
    python -I _launch.py --args-fd FD

``--args-fd FD``: the options and the program come NUL-separated from the file FD (closed once read),
not from the command line: what ``--hide-args`` passes on.

Steps run in this order (each one optional):

1. ``--cgroup-procs``: write our pid into each cgroup's ``cgroup.procs`` (the
   program and everything it forks stay in those cgroups).
2. ``--unshare-net``: a new, empty network namespace (no interfaces up).
3. ``--chown``: hand the scratch files the program must write to ``--uid``.
4. ``--uid``: drop every group and become that uid (rlimits like RLIMIT_NPROC
   do not apply to root, so this is what makes the process cap real).
5. ``--rlimit``: hard and soft limits, e.g. ``AS=2147483648``, ``NPROC=128``.
6. ``--pdeathsig PARENT_PID``: SIGKILL us when our parent dies (set after the uid
   change, which would clear it); if the parent is already gone (it died before
   this line), exit at once instead of running orphaned.
7. ``--seccomp``: ``no_new_privs`` and the seccomp filter of ``_seccomp.py`` (loaded by path from
   this file's folder), the last step before the program; if it cannot be installed, exit 97.
8. exec PROGRAM with exactly the ``--env`` variables (nothing inherited); with ``--hide-args N``,
   PROGRAM is bubblewrap and learner code must not read its command line in ``/proc/1/cmdline``
   (bubblewrap's init keeps it: the sandbox's mount plan, the checkout's paths): its options go
   through a memfd (bubblewrap's ``--args FD``, which it closes), and of the command after its
   ``--`` the first N words stay (the inner launcher's interpreter and script, at
   ``/run/course-grade/``) while the rest goes through a second memfd, to the inner launcher's
   ``--args-fd``. What is left: ``bwrap --args 3 -- /run/course-grade/python -I
   /run/course-grade/launch.py --args-fd 4``.

Exit status 97 means a step failed before the program started.

Steps 3 to 5 are :func:`drop_privileges` and :func:`set_rlimits`, which the kernel fork server
(``_zygote.py``) loads from this file by path and runs too: the one privilege drop of the grader;
it installs the same seccomp filter (step 7) in every kernel.
"""

import ctypes
import os
import resource
import signal
import sys

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
FAILED = 97


def _fail(message):
    """Say why on stderr (the kernel's log) and exit 97, before any learner code runs."""
    try:
        os.write(2, f"sandbox launcher: {message}\n".encode(errors="replace"))
    except OSError:
        pass
    os._exit(FAILED)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _chown_tree(path, uid):
    """Give ``path`` and everything below it to ``uid``, links themselves and never their targets.

    A loop, not :func:`os.walk` (recursive in Python 3.11: a 1,500-deep chain a cell left behind raised
    RecursionError at the next kernel start), and by descriptor, not by path (a chain deeper than
    PATH_MAX cannot be named): it goes down into each folder relative to the one it is in and back up
    through ``..``, holding one descriptor at a time. No learner process is alive while it runs (a fresh
    kernel's folders are handed over before it starts), so nothing moves a folder under it.
    """
    os.chown(path, uid, uid, follow_symlinks=False)
    if not os.path.isdir(path) or os.path.islink(path):
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

    def chown_children(fd):
        """Chown every entry of the folder ``fd``; return its subfolders' names."""
        with os.scandir(fd) as entries:
            found = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for name, _ in found:
            os.chown(name, uid, uid, dir_fd=fd, follow_symlinks=False)
        return [name for name, is_dir in found if is_dir]

    cur = os.open(path, flags)
    try:
        todo = [chown_children(cur)]
        while todo:
            if todo[-1]:
                try:
                    nxt = os.open(todo[-1].pop(), flags, dir_fd=cur)
                except OSError:
                    continue
                os.close(cur)
                cur = nxt
                todo.append(chown_children(cur))
            else:
                todo.pop()
                if todo:
                    up = os.open("..", flags, dir_fd=cur)
                    os.close(cur)
                    cur = up
    finally:
        os.close(cur)


def load_sibling(name):
    """A module of this file's folder, loaded by path (nothing of the package is importable here)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_course_grade_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: ``_seccomp.py``, once loaded (the fork server loads it before its kernels' file system hides it).
seccomp = None


def load_seccomp():
    """``_seccomp.py``, loaded once."""
    global seccomp
    if seccomp is None:
        seccomp = load_sibling("_seccomp")
    return seccomp


def install_seccomp():
    """Step 7: the seccomp filter of ``_seccomp.py`` (with ``no_new_privs``); exit 97 if it cannot be."""
    try:
        load_seccomp().install()
    except Exception as e:  # noqa: BLE001 - no filter, no learner code
        _fail(f"could not install the seccomp filter: {e}")


def drop_privileges(uid, chown=()):
    """Hand the trees ``chown`` to ``uid``, drop every group, become ``uid`` (real, effective and saved,
    so no capability is left); exit 97 if that fails or root remains."""
    try:
        for path in chown:
            _chown_tree(path, uid)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    except OSError as e:
        _fail(f"could not become uid {uid}: {e}")
    if os.getuid() == 0 or os.geteuid() == 0:
        _fail("still root after setuid")


def set_rlimits(limits):
    """Hard and soft limits, from ``(NAME, value)`` pairs such as ``("NPROC", 256)``; exit 97 on failure."""
    try:
        for name, value in limits:
            resource.setrlimit(getattr(resource, "RLIMIT_" + name), (int(value), int(value)))
    except (OSError, ValueError, AttributeError) as e:
        _fail(f"could not set rlimit: {e}")


def _memfd(words):
    """An inheritable memfd holding ``words``, NUL-separated, read from its start."""
    fd = os.memfd_create("args", 0)
    os.write(fd, b"".join(w.encode(errors="surrogateescape") + b"\0" for w in words))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def hide_args(program, keep):
    """bubblewrap's command line ``program`` with its options and all but ``keep`` words of its command
    in memfds (see step 8): the command line to exec."""
    split = program.index("--")
    command = program[split + 1:]
    options, rest = _memfd(program[1:split]), _memfd(command[keep:])
    return [program[0], "--args", str(options), "--", *command[:keep], "--args-fd", str(rest)]


def _read_args(fd):
    data = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return [w.decode(errors="surrogateescape") for w in data.split(b"\0")[:-1]]


def main(argv):
    if argv[:1] == ["--args-fd"] and len(argv) == 2:
        try:
            argv = _read_args(int(argv[1]))
        except (OSError, ValueError) as e:
            _fail(f"could not read the options from fd {argv[1]}: {e}")
    if "--" not in argv:
        _fail("usage: _launch.py [options] -- PROGRAM [ARGS...]")
    split = argv.index("--")
    opts, program = argv[:split], argv[split + 1:]
    if not program:
        _fail("no program to run")
    cgroups, chowns, rlimits, env = [], [], [], {}
    uid = None
    chdir = None
    parent = None
    hide = None
    unshare_net = False
    filtered = False
    i = 0
    while i < len(opts):
        opt = opts[i]
        if opt in ("--unshare-net", "--seccomp"):
            unshare_net |= opt == "--unshare-net"
            filtered |= opt == "--seccomp"
            i += 1
            continue
        if i + 1 >= len(opts):
            _fail(f"{opt} needs a value")
        value = opts[i + 1]
        i += 2
        if opt == "--cgroup-procs":
            cgroups.append(value)
        elif opt == "--chown":
            chowns.append(value)
        elif opt == "--uid":
            uid = int(value)
        elif opt == "--rlimit":
            name, _, limit = value.partition("=")
            rlimits.append((name, limit))
        elif opt == "--env":
            key, _, val = value.partition("=")
            env[key] = val
        elif opt == "--chdir":
            chdir = value
        elif opt == "--pdeathsig":
            parent = int(value)
        elif opt == "--hide-args":
            hide = int(value)
        else:
            _fail(f"unknown option {opt}")

    if filtered:   # read now, as root: the launcher's folder is root-only
        try:
            load_seccomp()
        except Exception as e:  # noqa: BLE001
            _fail(f"could not load the seccomp filter: {e}")
    try:
        for procs in cgroups:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
    except OSError as e:
        _fail(f"could not join cgroup {procs}: {e}")
    if unshare_net:
        libc = _libc()
        if libc.unshare(CLONE_NEWNET) != 0:
            _fail(f"unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())}")
    if uid is not None:
        drop_privileges(uid, chowns)
    set_rlimits(rlimits)
    if parent is not None:
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if parent > 0 and os.getppid() != parent:
            _fail(f"the grader (pid {parent}) is gone; not starting")
    os.umask(0o077)
    if chdir:
        try:
            os.chdir(chdir)
        except OSError as e:
            _fail(f"could not enter {chdir}: {e}")
    # Python ignores SIGXFSZ; restore the default so programs that are not Python die on it too.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    if hide is not None:
        try:
            program = hide_args(program, hide)
        except (OSError, ValueError) as e:
            _fail(f"could not pass the options by memfd: {e}")
    if filtered:
        install_seccomp()
    try:
        os.execve(program[0], program, env)
    except OSError as e:
        _fail(f"could not run {program[0]}: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
