"""What every message about a missing base image or a missing wheel holds: one sentence that names both
variables of a build with no registry, each with the command that fills it."""

from __future__ import annotations

BASE = "REPROBOX_BASE_IMAGE=reprobox/offline-base:bookworm (made by `reprobox offline-base`)"


def assert_names_the_offline_path(message: str, fill: str, wheelhouse: object = "DIR") -> None:
    """`message` is one line naming REPROBOX_BASE_IMAGE with `reprobox offline-base`, and
    REPROBOX_WHEELHOUSE=`wheelhouse` with `fill`, the exact command that fills it."""
    assert "\n" not in message
    assert ". " not in message.replace("e.g. ", "")  # one sentence
    assert BASE in message
    assert f"REPROBOX_WHEELHOUSE={wheelhouse} (filled by `{fill}` where the package index answers)" in message
