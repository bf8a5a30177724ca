"""The records a run leaves and reads back, one module each: guest.json (`guest`), manifest.json
(`manifest`, read as a `run.RunRecord`), trail.jsonl (`trail`), the attestation (`attestation`); and
their layout in the run dir (`layout`). Records are written atomically and parsed with JSON's nesting
bounded by `reprobox.fileio`; they sit below the guest, which writes them.

Nothing is imported here: the guest imports `trail` and `layout` in every job process.
"""
