"""`reprobox reproduce` as terminal text: the verdict's sentence, then what changed and what held."""

from __future__ import annotations

from reprobox.reproduce import ReproduceResult
from reprobox.valuetext import show_value


def reproduce_text(result: ReproduceResult) -> str:
    lines = [result.sentence]
    if result.code_changes:
        for kind in ("changed", "added", "removed"):
            lines += [f"  {kind}: {name}" for name in result.code_changes.get(kind, [])]
    shown = [d for d in result.stack_differences if d["affects_numerics"]][:8]
    lines += [
        f"  {d['label']}: {show_value(d['author'])} (author) -> {show_value(d['here'])} (here)" for d in shown
    ]
    for claim in result.claims:
        verdict = "holds" if claim["holds"] else f"does not hold ({claim['reason']})"
        lines.append(
            f"  claim {claim['name']}: published {claim['published']}, here {claim['reproduced']} "
            f"(allowed {claim['allowed']}): {verdict}"
        )
    for name, spread in result.seed_spread.items():
        author, here = spread["published"], spread["reproduced"]
        lines.append(
            f"  spread {name}: published {author['mean']:.6g} ± {author['std']:.3g} "
            f"({len(author['values'])} seeds), here {here['mean']:.6g} ± {here['std']:.3g} "
            f"({len(here['values'])} seeds): {'holds' if spread['holds'] else 'does not hold'}"
        )
    for segment in (result.segments or {}).get("segments") or []:
        lines.append(
            f"  steps {segment['start']}-{segment['end']}: {segment['outcome']}: {segment['sentence']}"
        )
    lines += [f"  report: {path}" for path in result.reports if path.suffix != ".json"]
    lines += [f"  note: {note}" for note in result.notes]
    return "\n".join(lines)
