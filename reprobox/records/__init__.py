"""The records a run leaves and reads back, one module each: guest.json (`guest`), manifest.json
(`manifest`, read as a `run.RunRecord`), trail.jsonl (`trail`), the attestation (`attestation`); and
the one leaf that writes them atomically and parses JSON with its nesting bounded (`files`).

Nothing is imported here: the guest imports `trail` and `files` in every job process.
"""
