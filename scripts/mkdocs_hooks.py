"""MkDocs hooks (mkdocs.yml names this file): README.md is the site's home page, one text for both.

GitHub shows README.md at the top of the repository and the pages under docs/; the site serves docs/ and
puts the README at its root. So the home page (docs/index.md) is replaced by the README, its links into
docs/ made relative to the site's root, and a page's link to ../README.md goes to the home page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == "index.md":
        readme = README.read_text(encoding="utf-8")
        return re.sub(r"\]\(docs/([^)]*)\)", lambda link: f"]({link[1] or 'index.md'})", readme)
    return re.sub(r"\]\(\.\./README\.md", "](index.md", markdown)
