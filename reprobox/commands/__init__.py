"""The subcommands: each module adds its parsers and handlers; handlers print only through cli.Output."""

from __future__ import annotations

from reprobox.commands import (
    audit,
    clean,
    cost,
    explain,
    images,
    inspect,
    jobs,
    publish,
    slurm_node,
    spotcheck,
)

REGISTRY = [
    jobs.register,
    explain.register,
    spotcheck.register,
    cost.register,
    images.register,
    audit.register,
    inspect.register,
    publish.register,
    clean.register,
    slurm_node.register,
]
