"""The author's variation matrix against the stack here: of the ways this machine differs from the
author's, which ones the author showed cannot change the result, which ones can, and which were never
varied.

Only factors that show in a fingerprint can be matched to a difference: the thread counts, the CPU
kernel level and ISA, the host name and the world size. The time zone, the user and the paths are not
fingerprinted, so for them (and for every factor when nothing differs) the notes only list what the
author verified.
"""

from __future__ import annotations

from collections.abc import Sequence

from reprobox import attest, stackdiff

# fingerprint fields (prefixes) that tell a factor's value; see guest/fingerprint/_fields.py
FACTOR_FIELDS: dict[str, tuple[str, ...]] = {
    "threads": ("software.threads.", "hardware.cpu.logical_cores", "hardware.cpu.usable_cores"),
    "cpu-isa": (
        "software.torch.cpu_capability",
        "software.environment.ATEN_CPU_CAPABILITY",
        "hardware.cpu.flags",
    ),
    "hostname": ("hardware.hostname",),
    "world-size": ("software.distributed.world_size",),
}
INVARIANT = "invariant"
SENSITIVE = "sensitive"


def differing_factors(diffs: Sequence[stackdiff.FieldDifference]) -> list[str]:
    """The factors whose fingerprint fields differ, in the registry's order."""
    return [
        factor
        for factor, fields in FACTOR_FIELDS.items()
        if any(d.field == f or d.field.startswith(f) for d in diffs for f in fields)
    ]


def factors_here(diffs: Sequence[stackdiff.FieldDifference]) -> dict[str, bool]:
    """Per factor a fingerprint can tell, whether it differs here; the other factors are not known."""
    differing = set(differing_factors(diffs))
    return {factor: factor in differing for factor in FACTOR_FIELDS}


def variation_notes(
    attestation: attest.Attestation, diffs: Sequence[stackdiff.FieldDifference]
) -> tuple[list[str], str]:
    """(notes, a clause for the verdict sentence, empty when nothing differing was varied)."""
    if attestation.variation is None:
        return [], ""
    invariant = attestation.factors_with_status(INVARIANT)
    sensitive = attestation.factors_with_status(SENSITIVE)
    differing = differing_factors(diffs)
    notes: list[str] = []
    if invariant:
        notes.append(
            f"the author verified the result invariant to {_and(invariant)} (reprobox verify --vary)"
        )
    if sensitive:
        notes.append(f"the author found the result sensitive to {_and(sensitive)}")
    safe = [f for f in differing if f in invariant]
    risky = [f for f in differing if f in sensitive]
    unknown = [f for f in differing if f not in invariant and f not in sensitive]
    for names, then in (
        (safe, "which the author verified cannot change the result"),
        (risky, "and the author found the result sensitive to {it}: pin {it} as the author had {it}"),
        (unknown, "and the author never varied {it}, so whether {it} matters is unknown"),
    ):
        if names:
            it = "it" if len(names) == 1 else "them"
            notes.append(f"{_and(names)} {_differ(names)} here, " + then.format(it=it))
    parts = []
    if safe:
        parts.append(f"the author verified the result invariant to {_and(safe)}")
    if risky:
        parts.append(
            f"found it sensitive to {_and(risky)}"
            if safe
            else f"the author found it sensitive to {_and(risky)}"
        )
    return notes, " and ".join(parts)


def _differ(names: Sequence[str]) -> str:
    return "differs" if len(names) == 1 else "differ"


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
