"""`offline-base`: build the small local base image that machines without a registry build on."""

from __future__ import annotations

import argparse
import subprocess
from typing import TYPE_CHECKING

from reprobox.commands.common import add_command
from reprobox.image.offline_base import DEFAULT_TAG, offline_base_command

if TYPE_CHECKING:
    from reprobox.commands.output import Output

OFFLINE_BASE_EPILOG = f"""\
examples:
  reprobox offline-base                           build {DEFAULT_TAG} (or say it exists)
  reprobox offline-base --tag my/base:bookworm    another name
  reprobox offline-base --refresh                 debootstrap again instead of the cached rootfs

Then build on it, from a wheelhouse of the image's wheels (filled where the package index answers by
reprobox lock --base cpu --wheelhouse DIR):
  export REPROBOX_BASE_IMAGE={DEFAULT_TAG} REPROBOX_WHEELHOUSE=DIR
(or reprobox build --base-image ... --wheelhouse ...).
debootstrap needs root: as a normal user the recipe runs again through sudo. It needs the Debian
mirror (DEBIAN_MIRROR) once; the rootfs is cached under $REPROBOX_CACHE/offline-base after that.
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    offline = add_command(
        commands,
        "offline-base",
        "build the offline base image (Debian bookworm + python3) for machines that cannot pull images",
        OFFLINE_BASE_EPILOG,
    )
    offline.add_argument(
        "--tag",
        metavar="IMAGE",
        help=f"the image to create (default: $REPROBOX_OFFLINE_BASE or {DEFAULT_TAG})",
    )
    offline.add_argument("--force", action="store_true", help="load the image again even if it exists")
    offline.add_argument(
        "--refresh", action="store_true", help="run debootstrap again instead of using the cached rootfs"
    )
    offline.set_defaults(handler=offline_base_command_handler)


def offline_base_command_handler(args: argparse.Namespace, out: Output) -> int:
    """The recipe runs with this terminal: its progress lines are its own."""
    command = offline_base_command(args.tag, force=args.force, refresh=args.refresh)
    return subprocess.run(command, check=False).returncode
