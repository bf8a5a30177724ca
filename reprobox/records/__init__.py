"""The records a run leaves: guest.json, manifest.json, trail.jsonl, and the files they are written with."""
