"""`reprobox lock`: a job's extra packages hash-locked on top of the image's own lock, and a wheelhouse
filled with every wheel of a lock for builds with no network.

A job adds packages to its image with `image: {requirements: LOCK, wheelhouse: DIR}`. The lock must fit
the image: resolved for its interpreter (CPython 3.11, manylinux x86_64) against the pins of its own
lock, which it leaves out, every line `name==version --hash=sha256:...`. uv resolves (`uv pip compile
--generate-hashes`, in seconds), pip where uv is absent or finds no resolution (`pip install --dry-run
--report`, whose failures are told as sentences); pip downloads (`pip download --require-hashes`); the
image's interpreter is given explicitly, so the lock is one the build's pip accepts. reprobox adds the
reading of the job's requirements, the choice of the image's lock, the lock file and one sentence for
each failure.

Inputs `_inputs`; the image's lock `_base`; the interpreter and wheel sources `_target`; pip's
configuration and whether its indexes answer `_sources`; uv `_uv`; pip `_pip` and its failures
`_failures`; the resolution and lock text `_resolve`; the wheelhouse `_fill`; the whole command `_run`.
"""

from reprobox.locking._base import BaseLock, base_lock, shown
from reprobox.locking._fill import Wheelhouse, check_hashed, check_wheelhouse, fill_wheelhouse
from reprobox.locking._inputs import Requirement, RequirementSet, read_requirements
from reprobox.locking._resolve import LockedPackage, Resolution, lock_text, resolve
from reprobox.locking._run import LockOptions, LockReport, regenerate_command, run_lock, shared_wheelhouse
from reprobox.locking._sources import IndexSettings, any_answers, pip_settings
from reprobox.locking._target import DEFAULT_PYTHON_VERSION, PLATFORMS, Target, check_python_version

__all__ = [
    "DEFAULT_PYTHON_VERSION",
    "PLATFORMS",
    "BaseLock",
    "IndexSettings",
    "LockOptions",
    "LockReport",
    "LockedPackage",
    "Requirement",
    "RequirementSet",
    "Resolution",
    "Target",
    "Wheelhouse",
    "any_answers",
    "base_lock",
    "check_hashed",
    "check_python_version",
    "check_wheelhouse",
    "fill_wheelhouse",
    "lock_text",
    "pip_settings",
    "read_requirements",
    "regenerate_command",
    "resolve",
    "run_lock",
    "shared_wheelhouse",
    "shown",
]
