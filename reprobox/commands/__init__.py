"""The subcommands: each module adds its parsers and handlers; handlers print only through cli.Output."""

from __future__ import annotations

from reprobox.commands import (
    audit,
    clean,
    cost,
    diff,
    explain,
    images,
    init,
    inspect,
    jobs,
    lock,
    offline_base,
    publish,
    slurm_node,
    spotcheck,
)

REGISTRY = [
    init.register,
    jobs.register,
    explain.register,
    diff.register,
    spotcheck.register,
    cost.register,
    images.register,
    offline_base.register,
    lock.register,
    audit.register,
    inspect.register,
    publish.register,
    clean.register,
    slurm_node.register,
]
