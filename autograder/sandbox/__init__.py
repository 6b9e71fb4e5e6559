"""The trust boundary: where learner code runs, and the only code that runs as root beside it.

Each file holds one idea:

=================  ===================================================================
``isolation.py``   the modes a machine offers and the minimum below which nothing is graded
``probe.py``       which of them work here (once per process), and the refusal below the minimum
``limits.py``      what one submission may use, and the size options that set it
``box.py``         one submission's sandbox: folders, uid, cgroup, the command wrapper
``mounts.py``      what learner code sees of the file system: one typed mount plan
``cgroup.py``      the memory + pids cgroup (v1 or v2)
``scratch.py``     scratch folders, their tmpfs cap, the sweep of a killed grader's leftovers
``kernel_env.py``  a kernel's environment, $IPYTHONDIR and matplotlib cache
``servers.py``     this process's kernel fork servers
``forkserver.py``  the grader's side of one fork server
``_zygote.py``     the fork server itself (run as root, imports nothing of the grader)
``_launch.py``     the launcher: cgroup, namespace, the one privilege drop, rlimits, seccomp, exec
``_seccomp.py``    the seccomp filter on learner code (classic BPF, written by hand)
``kernel_tweaks``  the kernel's two shortcuts, each checked against IPython
=================  ===================================================================

The names below are what the engine uses.
"""

from .box import Sandbox
from .isolation import KERNELS_ENV, CgroupVersion, DiskCap, Isolation, KernelStart, Network
from .limits import MAX_DISK_BYTES, MAX_MEMORY_BYTES, MIN_DISK_BYTES, MIN_MEMORY_BYTES, Limits, disk_limit_bytes, \
    memory_limit_bytes
from .mounts import GRADER_DIRS, INNER_LAUNCHER, LAUNCHER, REPO, TRUSTED_DIRS, mount_plan
from .probe import probe, require_minimum
from .cgroup import cgroup_parents
from .scratch import grader_mounts, scratch_dir, sweep_leftovers
from .servers import fork_server, fork_server_early, stop_fork_servers

__all__ = ["GRADER_DIRS", "INNER_LAUNCHER", "KERNELS_ENV", "LAUNCHER", "MAX_DISK_BYTES", "MAX_MEMORY_BYTES",
           "MIN_DISK_BYTES", "MIN_MEMORY_BYTES", "REPO", "TRUSTED_DIRS", "CgroupVersion", "DiskCap", "Isolation",
           "KernelStart", "Limits", "Network", "Sandbox", "cgroup_parents", "disk_limit_bytes", "fork_server",
           "fork_server_early", "grader_mounts", "memory_limit_bytes", "mount_plan", "probe", "require_minimum",
           "scratch_dir", "stop_fork_servers", "sweep_leftovers"]
