"""The seccomp filter on learner code: a small classic-BPF program, written here byte by byte.

Loaded by path (standard library only) by the launcher (``_launch.py``) and the fork server
(``_zygote.py``), and installed as the last step before learner code runs, after the privilege
drop and ``no_new_privs`` (:func:`install`). These are the bytes bubblewrap's ``--seccomp FD`` would
take; the launcher installs them itself because forked kernels never pass through bubblewrap: one
routine for both ways a kernel starts. It is a deny list over what the sandbox already allows: every
system call runs as before except

=======================================  ============================================================
denied (``EPERM``)                        why
=======================================  ============================================================
``unshare``, ``setns``, ``clone`` with   a user namespace gives learner code every capability inside
a namespace flag                          it (``unshare -Urm``: mounts, a root of its own) and the
                                          kernel's whole user-namespace attack surface
``clone3``                                its flags are in memory, out of a filter's reach: ``ENOSYS``
                                          instead, so glibc and Python fall back to ``clone`` (Docker's
                                          default profile does the same)
``io_uring_setup/enter/register``         a second system-call interface that seccomp cannot see
                                          into, and a long list of kernel bugs (Docker 25 denies it)
``keyctl``, ``add_key``, ``request_key``  the kernel keyrings are not namespaced (Docker denies them)
``bpf``, ``perf_event_open``,             kernel attack surface no notebook needs (Docker allows them
``userfaultfd``                           only with CAP_SYS_ADMIN; userfaultfd widens races)
``mount``, ``umount2``, ``pivot_root``,   the file system is the sandbox's; only a user namespace
``chroot``, the new mount API             would make them work, and they are denied with it
``socket`` of a family other than         AF_VSOCK reaches the hypervisor, outside the network
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK    namespace's "no network"; packet, Bluetooth, CAN, ALG...
                                          sockets are surface no notebook needs. AF_UNIX carries the
                                          kernel's ZeroMQ (``ipc://``: autograder/run/execute.py); AF_INET
                                          and AF_INET6 reach only the namespace's loopback; AF_NETLINK
                                          is what ``getifaddrs`` reads interfaces with
=======================================  ============================================================

The references are Docker's default profile (moby ``profiles/seccomp/default.json``: ``unshare``,
``setns``, ``mount``, ``bpf``, ``perf_event_open`` only with CAP_SYS_ADMIN, namespace flags of
``clone`` masked with 0x7E020000, ``clone3`` answered ENOSYS, no ``keyctl``/``add_key``/
``request_key``) and flatpak's socket-family allow list. The filter is built for the machine's own
architecture (x86_64 or aarch64, the two whose numbers are below, from ``asm/unistd_64.h`` and
``asm-generic/unistd.h``); a system call made under another ABI (i386's ``int 0x80``, x32) fails.
On another architecture :func:`program` raises :class:`Unsupported` and the launcher refuses to
run learner code (exit 97), in one line.

>>> len(program("x86_64")) % 8, len(program("aarch64")) > 0
(0, True)
>>> program("riscv64")
Traceback (most recent call last):
...
autograder.sandbox._seccomp.Unsupported: no seccomp filter for riscv64 (x86_64 and aarch64 have one)
"""

import ctypes
import errno
import platform
import struct

# ---- classic BPF, as linux/filter.h and linux/seccomp.h spell it --------------------------------
LD_W_ABS = 0x20          # BPF_LD | BPF_W | BPF_ABS: A = 32-bit word of seccomp_data at k
JEQ_K, JGE_K = 0x15, 0x35  # BPF_JMP | BPF_JEQ/BPF_JGE | BPF_K: jump jt if A ==/>= k, else jf
AND_K = 0x54             # BPF_ALU | BPF_AND | BPF_K: A &= k
RET_K = 0x06             # BPF_RET | BPF_K: return k
RET_ALLOW = 0x7FFF0000   # SECCOMP_RET_ALLOW
RET_ERRNO = 0x00050000   # SECCOMP_RET_ERRNO | errno
# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }
NR_AT, ARCH_AT = 0, 4
ARG0_LOW_AT = 16         # args[0]'s low 32 bits (little-endian: both architectures here)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

#: Namespace flags of clone(2): NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (Docker's mask).
CLONE_NAMESPACES = 0x7E020000
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
ALLOWED_FAMILIES = (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK)
X32_SYSCALL_BIT = 0x40000000

DENIED = ("unshare", "setns", "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key",
          "request_key", "bpf", "perf_event_open", "userfaultfd", "mount", "umount2", "pivot_root", "chroot",
          "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")


class Arch:
    def __init__(self, audit, numbers):
        self.audit, self.numbers = audit, numbers


#: AUDIT_ARCH_* (linux/audit.h) and the system-call numbers that matter here.
ARCHES = {
    "x86_64": Arch(0xC000003E, {  # asm/unistd_64.h
        "unshare": 272, "setns": 308, "clone": 56, "clone3": 435, "socket": 41, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249,
        "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442}),
    "aarch64": Arch(0xC00000B7, {  # asm-generic/unistd.h
        "unshare": 97, "setns": 268, "clone": 220, "clone3": 435, "socket": 198, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218,
        "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "mount": 40, "umount2": 39, "pivot_root": 41,
        "chroot": 51, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442}),
}


class Unsupported(RuntimeError):
    """No filter is known for this architecture."""


def _assemble(lines):
    """Instructions ``(code, k, jump_true, jump_false)`` with jumps to label names (str) or 0,
    and label names on lines of their own: the program's bytes (struct sock_filter, 8 bytes each)."""
    where, n = {}, 0
    for line in lines:
        if isinstance(line, str):
            where[line] = n
        else:
            n += 1
    out, pc = [], 0
    for line in lines:
        if isinstance(line, str):
            continue
        code, k, jt, jf = line
        jt = where[jt] - pc - 1 if isinstance(jt, str) else jt
        jf = where[jf] - pc - 1 if isinstance(jf, str) else jf
        assert 0 <= jt < 256 and 0 <= jf < 256, "a jump past 255 instructions"
        out.append(struct.pack("<HBBI", code, jt, jf, k))
        pc += 1
    return b"".join(out)


def program(machine=None):
    """The filter's bytes for ``machine`` (default: this one's, ``platform.machine()``)."""
    machine = machine or platform.machine()
    arch = ARCHES.get(machine)
    if arch is None:
        raise Unsupported(f"no seccomp filter for {machine} (x86_64 and aarch64 have one)")
    nr = arch.numbers
    lines = [(LD_W_ABS, ARCH_AT, 0, 0),
             (JEQ_K, arch.audit, 0, "deny"),            # another ABI (i386's int 0x80): denied
             (LD_W_ABS, NR_AT, 0, 0)]
    if machine == "x86_64":
        lines.append((JGE_K, X32_SYSCALL_BIT, "deny", 0))   # x32 system calls: denied
    lines += [(JEQ_K, nr[name], "deny", 0) for name in DENIED]
    lines += [(JEQ_K, nr["clone3"], "enosys", 0),
              (JEQ_K, nr["clone"], "clone", 0),
              (JEQ_K, nr["socket"], "socket", 0),
              (RET_K, RET_ALLOW, 0, 0),
              "clone",                                  # clone(flags, ...): flags are args[0] on both
              (LD_W_ABS, ARG0_LOW_AT, 0, 0),
              (AND_K, CLONE_NAMESPACES, 0, 0),
              (JEQ_K, 0, "allow", "deny"),
              "socket",                                 # socket(family, ...): an int, its low 32 bits
              (LD_W_ABS, ARG0_LOW_AT, 0, 0)]
    lines += [(JEQ_K, family, "allow", 0) for family in ALLOWED_FAMILIES]
    lines += ["deny", (RET_K, RET_ERRNO | errno.EPERM, 0, 0),
              "enosys", (RET_K, RET_ERRNO | errno.ENOSYS, 0, 0),
              "allow", (RET_K, RET_ALLOW, 0, 0)]
    return _assemble(lines)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(code=None):
    """Install the filter on this thread and the processes it starts (after ``no_new_privs``, which
    an unprivileged process needs and keeps across exec). Raises OSError if the kernel refuses."""
    code = program() if code is None else code
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.addressof(buf))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
