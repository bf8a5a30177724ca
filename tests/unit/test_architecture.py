"""The seams docs/architecture.md draws, checked on the code: who may import what, and who reads records."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "reprobox"
# What the guest may import besides itself: leaves with no controller logic and no docker SDK.
GUEST_MAY_IMPORT = (
    "reprobox.records",
    "reprobox.saferead",
    "reprobox.yamlsource",
    "reprobox.errors",
    "reprobox.timestamps",
    "reprobox._version",
    "reprobox.fileio",
    "reprobox.diskspace",
)


def _modules() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "reprobox":  # `from reprobox import x` imports the module reprobox.x
                found |= {f"reprobox.{alias.name}" for alias in node.names}
            else:
                found.add(node.module)
    return found


def _inside(path: Path, *parts: str) -> bool:
    return path.relative_to(PACKAGE).parts[: len(parts)] == parts


def test_the_guest_imports_no_controller_module() -> None:
    wrong = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path, tree in _modules().items()
        if _inside(path, "guest")
        for name in _imports(tree)
        if name.startswith("reprobox") and not name.startswith(("reprobox.guest", *GUEST_MAY_IMPORT))
    }
    assert not wrong, sorted(wrong)


def test_only_the_engine_imports_the_docker_sdk() -> None:
    wrong = {
        str(path.relative_to(PACKAGE))
        for path, tree in _modules().items()
        if not _inside(path, "engine")
        and any(n == "docker" or n.startswith("docker.") for n in _imports(tree))
    }
    assert not wrong, sorted(wrong)


def test_only_the_cli_parses_arguments_with_argparse() -> None:
    wrong = {
        str(path.relative_to(PACKAGE))
        for path, tree in _modules().items()
        if "argparse" in _imports(tree) and not (_inside(path, "commands") or path == PACKAGE / "cli.py")
    }
    assert not wrong, sorted(wrong)


def test_records_are_read_only_through_their_typed_readers() -> None:
    raw = re.compile(r"\brecord\w*\.data(\.get\(|\[)|\.data\.get\(")
    wrong = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not _inside(path, "records")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if raw.search(line)
    ]
    assert not wrong, wrong


def test_the_runner_reaches_no_feature_package() -> None:
    """Every run goes through the runner; what a resumed or stopped run needs comes in with its options
    (`RunOptions.start`, planned by `reprobox.resume`), so the core imports no resume module."""
    imports = _imports(_modules()[PACKAGE / "runner.py"])
    assert "reprobox" not in imports  # `import reprobox` would reach reprobox.resume by attribute
    assert not {name for name in imports if name.startswith("reprobox.resume")}
