"""The trust boundary: where learner code runs, and the only code that runs as root beside it.

Moved here from ``autograder/sandbox.py`` as it was; the names below are what the engine uses.
"""

from .box import (GRADER_DIRS, INNER_LAUNCHER, KERNELS_ENV, LAUNCHER, MAX_DISK_BYTES, MAX_MEMORY_BYTES,
                  MIN_DISK_BYTES, MIN_MEMORY_BYTES, REPO, TRUSTED_DIRS, Cgroup, Isolation, Limits, Sandbox,
                  cgroup_parents, disk_limit_bytes, fork_server, fork_server_early, fork_server_env, grader_mounts,
                  kernel_env, memory_limit_bytes, mount_plan, mount_tmpfs, probe, scratch_dir, stop_fork_servers,
                  sweep_leftovers, unmount)
from course_lib.units import GiB, KiB, MiB, TiB  # noqa: F401 - the sizes the engine's messages use
