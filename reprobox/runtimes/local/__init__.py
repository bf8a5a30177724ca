"""The `local` runtime: the guest as a child process of the controller, on this machine's Python."""

from reprobox.runtimes.local._runtime import LocalRuntime

__all__ = ["LocalRuntime"]
