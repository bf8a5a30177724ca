"""The reproduction's report: report.md, report.html and result.json, the run report headed by the
reproduction's own sentence, what was replayed and (when the attestation carries one) the author's
variation matrix, all written atomically."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from reprobox.fileio import write_json_atomic, write_text_atomic
from reprobox.records.manifest import RunRecord
from reprobox.render import document
from reprobox.render.blocks import Block
from reprobox.render.html import html_document
from reprobox.render.markdown import markdown
from reprobox.render.variation_document import author_matrix_blocks
from reprobox.reproduce._model import Context, ReproduceResult
from reprobox.reproduce._replay import without_replay_pins
from reprobox.reproduce._variation import factors_here

RESULT_NAME = "result.json"


def report_dir_for(ctx: Context) -> Path:
    if ctx.options.report_dir is not None:
        return ctx.options.report_dir
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = ctx.options.runs_dir / "reproductions" / f"{ctx.attestation.job['name']}-{stamp}"
    candidate, number = base, 1
    while candidate.exists():
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate


def write_reports(ctx: Context, records: Sequence[RunRecord], result: ReproduceResult) -> list[Path]:
    """report.md, report.html and result.json next to the author's record, all written atomically."""
    if result.comparison is None or ctx.report_dir is None or ctx.published_record is None:
        return []  # a failed run: its own record says why
    report_dir = ctx.report_dir
    data = document.gather([ctx.published_record, *records], result.comparison)
    data.stack_differences = ctx.stack_differences or data.stack_differences
    data.stack_sentence = None  # the reproduction's own sentence heads the report
    lead = _summary_blocks(ctx, result)
    variation = ctx.attestation.variation
    if variation is not None:  # the author's matrix beside how this machine differs
        differs = factors_here(without_replay_pins(data.stack_differences, ctx.replay_pin))
        lead += author_matrix_blocks(variation, differs)
    markdown_path, html_path, json_path = (
        report_dir / "report.md",
        report_dir / "report.html",
        report_dir / RESULT_NAME,
    )
    result.reports = [markdown_path, html_path, json_path]
    write_text_atomic(markdown_path, markdown(data, None, lead=lead))
    write_text_atomic(html_path, html_document(data, None, lead=lead))
    write_json_atomic(json_path, result.to_json())
    return result.reports


def _summary_blocks(ctx: Context, result: ReproduceResult) -> list[Block]:
    """The reproduction's own verdict and what it checked, ahead of the run comparison."""
    threads = result.settings.get("threads", {})
    image = result.image or {}
    signature = "absent"
    if result.signature.get("signed"):
        signature = "verified" if result.signature.get("verified") else "not checked"
    model = result.signature.get("model") or {}
    if model.get("verified"):
        files = "and the checkpoint files" if model.get("checkpoints_verified") else "(files not at hand)"
        signature += f"; model signature {Path(model['path']).name} verified {files}"
    how = f" ({image['how']})" if image.get("how") else ""
    items = [
        f"attestation: {result.attestation} ({ctx.attestation.verified_runs} verified run(s) by the "
        f"author; signature {signature})",
        f"code: {result.code_dir} matches the attested tree ({ctx.attestation.code['sha256'][:16]})",
        f"image: {image.get('id', 'none (local runtime)')}{how}",
        f"replayed: seed {result.settings.get('seed')}, {threads.get('used')} threads "
        f"(author: {threads.get('author')}), world size {result.settings.get('world_size')}",
        f"runs here: {', '.join(str(r) for r in result.runs)}",
    ]
    if result.bundle:
        items.append(f"bundle: {result.bundle['path']} (sha256 {result.bundle['sha256']})")
    items += [f"note: {note}" for note in result.notes]
    blocks = [
        Block("heading", "Reproduction"),
        Block(
            "para",
            f"(grade {result.grade or result.verdict}; exit code {result.exit_code})",
            label=result.sentence,
            ident="reproduction",
        ),
        Block("list", items=tuple(items)),
    ]
    if result.claims:
        blocks += _claims_blocks(result)
    if result.seed_spread:
        blocks += _spread_blocks(result)
    return blocks


def _spread_blocks(result: ReproduceResult) -> list[Block]:
    """Each claim's mean ± std over seeds, the author's and here, and whether each mean lies in the
    other's interval."""
    rows = []
    for name, spread in result.seed_spread.items():
        author, here = spread["published"], spread["reproduced"]
        rows.append(
            (
                name,
                f"{author['mean']:.6g} ± {author['std']:.3g} ({len(author['values'])})",
                f"{here['mean']:.6g} ± {here['std']:.3g} ({len(here['values'])})",
                "yes" if spread["published_in_reproduced"] else "no",
                "yes" if spread["reproduced_in_published"] else "no",
            )
        )
    failing = frozenset(name for name, spread in result.seed_spread.items() if not spread["holds"])
    headers = (
        "claim",
        "published (seeds)",
        "here (seeds)",
        "published mean in here's",
        "here's in published",
    )
    return [
        Block("heading", "Seed spread"),
        Block("table", headers=headers, rows=tuple(rows), highlight=failing),
    ]


def _claims_blocks(result: ReproduceResult) -> list[Block]:
    """The paper's numbers: published, reproduced, the difference, what was allowed, whether it holds."""
    rows = tuple(
        (
            str(c["name"]),
            _shown(c["published"]),
            _shown(c["reproduced"]),
            _shown(c["difference"]),
            str(c["allowed"]),
            "holds" if c["holds"] else f"does not hold: {c['reason']}",
        )
        for c in result.claims
    )
    failing = frozenset(str(c["name"]) for c in result.claims if not c["holds"])
    return [
        Block("heading", "Claims"),
        Block(
            "table",
            headers=("claim", "published", "reproduced", "difference", "allowed", "verdict"),
            rows=rows,
            highlight=failing,
        ),
    ]


def _shown(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)
