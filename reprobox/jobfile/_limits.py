"""The bounds of every job-file field, each with why: what a file system, the kernel or an engine
accepts, or past which a value can only be a typo."""

MAX_NAME_LENGTH = 128  # the name goes into directory, container and Slurm job names
MAX_PATH_COMPONENT_BYTES = 255  # NAME_MAX on Linux, macOS and Windows file systems
MAX_PATH_BYTES = 4095  # PATH_MAX minus the terminating NUL
MAX_TIMEOUT = 366 * 24 * 3600.0  # a year: longer is a typo, and timers overflow far beyond
MIN_CPUS, MAX_CPUS = 0.01, 4096.0  # Docker refuses fewer than 0.01 CPUs
MIN_MEMORY = 6 * 1024**2  # Docker refuses a memory limit below 6 MiB
MAX_SIZE = 1024**5  # 1 PiB: more is a typo, and overflows what engines accept
MAX_PIDS = 4_194_304  # the kernel's PID_MAX_LIMIT
MAX_PROCESSES = 1024  # launcher.nproc_per_node and launcher.nnodes
MAX_THREADS = 4096  # determinism.threads
MAX_ARG_BYTES = 128 * 1024 - 1  # Linux's MAX_ARG_STRLEN: execve refuses a longer argument or KEY=value
RESERVED_TARGETS = ("/reprobox", "/proc", "/sys", "/dev")  # reprobox's own mounts and the kernel's
RESERVED_ENV = ("PYTHONHASHSEED",)  # plus every REPROBOX_* name
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
