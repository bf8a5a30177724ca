"""The `local` runtime: the guest as a child process of the controller, on this machine's Python.

Modules: `_runtime` (`LocalRuntime`: stable paths, isolation mode, one run), `_process` (the guest's
process group: start, stream, stop), `_namespace` (the private mount namespace: probe and binds; the
guest enters it itself, `reprobox.guest.namespace`), `fixed_paths` (fixed folders where no namespace is
allowed) and `jobprocs`.
"""

from reprobox.runtimes.local._runtime import LocalRuntime, create

__all__ = ["LocalRuntime", "create"]
