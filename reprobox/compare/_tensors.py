"""Which tensors of a checkpoint differ between two runs, and by how much (the statistics need torch and
both runs' files; the verdict stands without them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reprobox import outputvalues
from reprobox.compare._marks import WHOLE_FILE
from reprobox.records.manifest import RunRecord
from reprobox.runspecific import RunContext, masked_name


def differing_tensor_names(
    a: dict[str, Any], b: dict[str, Any], *, contexts: tuple[RunContext, RunContext] | None = None
) -> list[str]:
    """Tensor names whose digest, dtype or shape differ, or that exist on one side only, in name order.

    With the runs' contexts, names that hold a run's own path (a dict keyed by checkpoint paths) are
    matched once those paths are masked. ``<file>`` stands for a file read as bytes.
    """
    ta = {t["name"]: {k: v for k, v in t.items() if k != "name"} for t in a.get("tensors", [])}
    tb = {t["name"]: {k: v for k, v in t.items() if k != "name"} for t in b.get("tensors", [])}
    if not ta and not tb:
        if a.get("format", "file") == "file" or b.get("format", "file") == "file":
            return [WHOLE_FILE] if a.get("content_sha256") != b.get("content_sha256") else []
        return []
    if contexts is not None and set(ta) != set(tb):
        masked_a = {masked_name(n, contexts[0]): v for n, v in ta.items()}
        masked_b = {masked_name(n, contexts[1]): v for n, v in tb.items()}
        if len(masked_a) == len(ta) and len(masked_b) == len(tb):
            ta, tb = masked_a, masked_b
    return sorted(name for name in set(ta) | set(tb) if ta.get(name) != tb.get(name))


def tensor_differences(
    a: RunRecord,
    b: RunRecord,
    path: str,
    names: list[str],
    *,
    tensor_details: bool,
    notes: list[str],
    name_in_b: Callable[[str], str] = str,
) -> list[dict[str, Any]]:
    plain = [{"checkpoint": path, "name": name} for name in names]
    if not names or not tensor_details or names == ["<file>"]:
        return plain
    file_a = outputvalues.output_file(a.output_dir, path)
    file_b = outputvalues.output_file(b.output_dir, path)
    if file_a is None or file_b is None:
        notes.append(
            f"checkpoint {path}: not a regular file inside both runs' outputs; tensor statistics skipped"
        )
        return plain
    from reprobox import tensordiff

    try:
        diffs = tensordiff.diff_checkpoint_files(
            file_a, file_b, checkpoint=path, names=names, name_in_b=name_in_b
        )
    except ImportError:
        notes.append("install torch to see how much the differing tensors differ")
        return plain
    except Exception as exc:  # noqa: BLE001 - statistics explain; the verdict stands without them
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")[:300]
        notes.append(f"checkpoint {path}: tensor statistics unavailable ({type(exc).__name__}: {first})")
        return plain
    return [d.to_json() for d in diffs]
