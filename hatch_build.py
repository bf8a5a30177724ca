"""The wheel's image files: the checkout's Dockerfile, env/ and pyproject.toml, copied into
reprobox/_image/ at build time, so an installed reprobox builds its image with no checkout on disk.

A build hook rather than a static `force-include`: hatchling would put a static one into editable
installs too, leaving a stale copy (and a namespace `reprobox` folder) in site-packages.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Source in the checkout -> path in the wheel; reprobox/image/_project.py reads them there.
IMAGE_FILES = {
    "Dockerfile": "reprobox/_image/Dockerfile",
    "env": "reprobox/_image/env",
    "pyproject.toml": "reprobox/_image/pyproject.toml",
}


class ImageFilesHook(BuildHookInterface[BuilderConfig]):
    """Adds the image files to standard wheels; editable wheels read them from the checkout."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name == "wheel" and version == "standard":
            build_data["force_include"].update(IMAGE_FILES)
