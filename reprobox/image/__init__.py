"""The reprobox image as data: which files, build args and labels make it, and the tag that names it.

Pure functions, no engine. The build context is a tar made in memory with sorted names, zero owners,
a fixed mtime and normalized modes, so the same sources always give the same bytes. The image tag is a
hash of that context and the build args: an unchanged job finds its image by name and never builds.

Wheels from a wheelhouse join the context for the build, but enter the tag by name and size only:
their content is pinned by the lock's hashes, which pip checks, and hashing hundreds of MB of wheels
would make every "is it built already?" check slow.

A job's image is the shared image (the stack every job uses, built once) plus, for a job with extra
packages (`image.requirements`), one layer of those packages alone (`_extras`), tagged by the shared
image's tag and the extras' digest: jobs with the same extras share it, and none rebuilds the stack.

A job's own wheelhouse (`image.wheelhouse`) adds to the shared one (`--wheelhouse` /
REPROBOX_WHEELHOUSE): pip reads the wheels of both from one wheelhouse/ in each context, with
`--no-index`. Every wheel the locks pin is looked for before any build, and one that neither wheelhouse
has is named with the lock line that wants it, so pip never gets to fail on it.

The plan is `_plan`; the context tar `_context`; the extras layer `_extras`; locks `_lock`; wheelhouses
`_wheelhouse`; the image files, a checkout's or the copies a wheel carries in reprobox/_image/, `_project`;
the CUDA image from torch's CUDA wheels on a base without CUDA (`--cuda`), `_cuda`.
"""

from reprobox.image._context import (
    CONTEXT_MTIME,
    CONTEXT_WHEELHOUSE,
)
from reprobox.image._cuda import CUDA_LOCK, cuda_build
from reprobox.image._extras import EXTRAS_DOCKERFILE, EXTRAS_LOCK
from reprobox.image._lock import (
    LockLine,
    check_extra_lock,
    lock_lines,
    locked_pins,
    normalize_name,
)
from reprobox.image._plan import (
    LABEL_PREFIX,
    LOCK_VARIABLE,
    MANAGED_LABEL,
    SHARED_IMAGE_LABEL,
    BuildPlan,
    plan_build,
    render_build_plan,
    write_build_context,
)
from reprobox.image._project import (
    ProjectFiles,
    default_base_image,
    deterministic_env,
    project_files,
)
from reprobox.image._space import MEASURED_PEAK_OVER_FLOOR, build_space_floor
from reprobox.image._wheelhouse import (
    LOCKS,
    wheel_pin,
)
from reprobox.offline import BASE_IMAGE_VARIABLE, WHEELHOUSE_VARIABLE

__all__ = [
    "BASE_IMAGE_VARIABLE",
    "CONTEXT_MTIME",
    "CONTEXT_WHEELHOUSE",
    "CUDA_LOCK",
    "EXTRAS_DOCKERFILE",
    "EXTRAS_LOCK",
    "LABEL_PREFIX",
    "LOCKS",
    "LOCK_VARIABLE",
    "MANAGED_LABEL",
    "MEASURED_PEAK_OVER_FLOOR",
    "SHARED_IMAGE_LABEL",
    "WHEELHOUSE_VARIABLE",
    "BuildPlan",
    "LockLine",
    "ProjectFiles",
    "build_space_floor",
    "check_extra_lock",
    "cuda_build",
    "default_base_image",
    "deterministic_env",
    "lock_lines",
    "locked_pins",
    "normalize_name",
    "plan_build",
    "project_files",
    "render_build_plan",
    "wheel_pin",
    "write_build_context",
]
