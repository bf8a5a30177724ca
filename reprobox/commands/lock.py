"""`lock`: a job's extra packages hash-locked on top of the image's lock; wheelhouses for offline builds."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox.commands.common import add_command, add_output_flags, check_output_file, check_output_folder
from reprobox.errors import EXIT_OK, UsageError
from reprobox.offline import WHEELHOUSE_VARIABLE

if TYPE_CHECKING:
    from reprobox.commands.output import Output
    from reprobox.locking import LockOptions, LockReport

LOCK_EPILOG = """\
examples:
  reprobox lock requirements.in -o requirements.lock                  lock a job's own packages
  reprobox lock pyproject.toml -o requirements.lock --base cuda       its [project] dependencies
  reprobox lock requirements.in -o requirements.lock --wheelhouse ./wheels    and fetch their wheels
  reprobox lock --base cpu --wheelhouse ~/.cache/reprobox/wheelhouse  the image's own wheels
  reprobox lock --wheelhouse ./wheels --locked requirements.lock      the wheels of a lock you have
  reprobox lock requirements.in -o requirements.lock --json | jq -r '.packages[].name'

Then name them in the job file: image: {requirements: requirements.lock, wheelhouse: ./wheels}.

REQUIREMENTS is a requirements.in or requirements.txt (names, versions, extras, markers, -r and -c
includes) or a pyproject.toml (its [project] dependencies). uv resolves it in seconds (where uv finds
no resolution, pip resolves again to name the requirement at fault) for the image's Python and
platform (CPython 3.11, manylinux x86_64; --python-version) with every pin of the image's own lock as a
constraint: --base cpu, cuda or a lock file, by default the lock an image build takes ($REPROBOX_LOCK,
else the one $REPROBOX_WHEELHOUSE holds whole, else cuda). Packages that lock pins are left out (the
image installs them); a requirement that needs another version of one is refused, naming both. Every
package must have a wheel: the image builds nothing from source, so editable, VCS, URL and path
requirements are refused. Environment markers are evaluated for the machine it runs on.

--wheelhouse DIR downloads every wheel of the new lock (pip download --require-hashes: a file whose
sha256 the lock does not list is refused), then checks DIR holds each one as the build looks for it.
Where $REPROBOX_WHEELHOUSE is set (the wheelhouse image builds read), it is the default, as for
`reprobox init`: a lock's wheels land where its build looks. With no REQUIREMENTS it fills the image's
own lock (--base); --image-lock adds it to a job's lock, and --locked LOCK adds a lock already written.
pip's own configuration (index, find-links, constraints) applies, to uv's resolution too, and
--find-links / --no-index add to it. Where no index answers, it says so at once; with a wheelhouse
that holds wheels, it locks and checks from that wheelhouse alone, offline. The lock is written last:
a failure leaves it as it was.

exit: 0 locked (and the wheelhouse filled), 2 bad input (a file, a requirement, a conflict with the
image's pins, a package with no wheel for the image), 4 no network or no pip
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        commands,
        "lock",
        "hash-lock a job's extra packages on top of the image's lock, and fill wheelhouses",
        LOCK_EPILOG,
        description="Write a job's hash-locked extra requirements (image: {requirements: LOCK}), resolved "
        "for the image's Python against its own lock, and fill wheelhouses for offline builds.",
    )
    parser.add_argument(
        "requirements",
        nargs="?",
        type=Path,
        metavar="REQUIREMENTS",
        help="a requirements.in / requirements.txt, or a pyproject.toml ([project] dependencies)",
    )
    parser.add_argument("-o", "--output", type=Path, metavar="LOCK", help="the lock file to write")
    parser.add_argument(
        "--base",
        metavar="cpu|cuda|PATH",
        help="the image's own lock to resolve against (default: the one an image build takes: "
        "$REPROBOX_LOCK, else the one $REPROBOX_WHEELHOUSE holds whole, else cuda)",
    )
    parser.add_argument(
        "--python-version",
        default="3.11",
        metavar="X.Y",
        help="the image's Python (default: 3.11)",
    )
    parser.add_argument(
        "--wheelhouse",
        type=Path,
        metavar="DIR",
        help="also download every locked wheel into DIR (hashes checked) and check it holds them all "
        f"(default: ${WHEELHOUSE_VARIABLE}, where set)",
    )
    parser.add_argument(
        "--image-lock",
        action="store_true",
        help="with --wheelhouse: fetch the image's own lock (--base) too (the default with no REQUIREMENTS)",
    )
    parser.add_argument(
        "--locked",
        type=Path,
        action="append",
        default=[],
        metavar="LOCK",
        help="with --wheelhouse: fetch the wheels of this lock too (repeatable)",
    )
    parser.add_argument(
        "--find-links",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder (or URL) of wheels for pip besides its configuration (repeatable)",
    )
    parser.add_argument("--no-index", action="store_true", help="use no package index, only --find-links")
    add_output_flags(parser)
    parser.set_defaults(handler=lock_command)


def lock_command(args: argparse.Namespace, out: Output) -> int:
    from reprobox import locking

    options = lock_options(args)
    report = locking.run_lock(options)
    out.result(report.to_json(), "\n".join(_text(report)))
    return EXIT_OK


def lock_options(args: argparse.Namespace) -> LockOptions:
    """The flags as the library takes them, refused up front when they do not go together."""
    from reprobox import locking

    if args.requirements is not None and args.output is None:
        raise UsageError("-o LOCK is missing: name the lock file to write, e.g. -o requirements.lock")
    if args.requirements is None and args.output is not None:
        raise UsageError(
            f"-o {args.output} needs REQUIREMENTS to lock, e.g. reprobox lock requirements.in -o LOCK"
        )
    wheelhouse, flag = args.wheelhouse, "--wheelhouse"
    if wheelhouse is None and (args.requirements is not None or args.image_lock or args.locked):
        wheelhouse, flag = locking.shared_wheelhouse(os.environ), f"${WHEELHOUSE_VARIABLE}"
    if wheelhouse is None and (args.image_lock or args.locked):
        flag = "--image-lock" if args.image_lock else "--locked"
        raise UsageError(f"{flag} says what to put in a wheelhouse; add --wheelhouse DIR")
    if args.requirements is None and wheelhouse is None:
        raise UsageError(
            "nothing to do: give REQUIREMENTS -o LOCK to lock a job's packages, or --wheelhouse DIR to fill "
            "a wheelhouse (see reprobox lock --help)"
        )
    if args.output is not None:  # missing folders are made at the end
        check_output_file(args.output, "-o", make_folders=True, example="requirements.lock")
    if wheelhouse is not None:
        check_output_folder(wheelhouse, flag, "pass a folder you can write, e.g. --wheelhouse ./wheels")
    for source in args.find_links:
        if "://" not in source and not Path(source).is_dir():
            raise UsageError(f"--find-links {source} is not a folder; pass a folder of wheels")
    target = locking.Target(
        python_version=locking.check_python_version(args.python_version),
        find_links=tuple(args.find_links),
        no_index=args.no_index,
    )
    return locking.LockOptions(
        requirements=args.requirements,
        output=args.output,
        base=args.base,
        target=target,
        wheelhouse=wheelhouse,
        image_lock=args.image_lock,
        locked=tuple(args.locked),
    )


def _text(report: LockReport) -> list[str]:
    """The human summary: what was locked, what the image provides, what the wheelhouse holds."""
    from reprobox.locking import shown

    lines = []
    options = report.options
    if report.resolution is not None and report.base is not None:
        packages = report.resolution.packages
        left_out = ", ".join(f"{p.name} {p.version}" for p in report.resolution.left_out)
        lines.append(
            f"wrote {options.output}: {len(packages)} package{'s' * (len(packages) != 1)} for "
            f"{options.target.describe()} on top of {report.base.shown()}"
            + (f" (left out, pinned by the image: {left_out})" if left_out else "")
        )
        lines += [f"  {p.name}=={p.version}" for p in packages]
    if report.wheelhouse is not None:
        house = report.wheelhouse
        size = sum(wheel.stat().st_size for wheel in house.wheels) / 1e6
        base = report.base
        locks = ", ".join(base.shown() if base and lock == base.path else shown(lock) for lock in house.locks)
        count = f"{len(house.wheels)} wheel{'s' * (len(house.wheels) != 1)}, {size:.1f} MB"
        lines.append(f"wheelhouse {house.path} holds every wheel of {locks} ({count})")
        if report.base is not None and report.base.path in house.locks:
            build = f"export REPROBOX_WHEELHOUSE={house.path}"
            if report.base.name is not None:
                build += f" REPROBOX_LOCK={report.base.name}"
            lines.append(f"build offline with: {build}")
        else:
            lines.append(
                f"build offline with it: image: {{wheelhouse: {house.path}}} in the job file, or "
                f"REPROBOX_WHEELHOUSE={house.path}"
            )
    return lines
