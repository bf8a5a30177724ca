"""The JSON Schema of the reprobox predicate, shipped in the package so other tools can check one.

The checks that decide whether reprobox reads an attestation stay in `_validate` (they also compare the
parts that restate each other, which a schema cannot); the schema says the same shape for everyone else
and is published in the docs.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

SCHEMA_FILE = "predicate-v1.schema.json"


def predicate_schema() -> dict[str, Any]:
    """The predicate's JSON Schema (draft 2020-12), read from the package data."""
    schemas = resources.files("reprobox.attest").joinpath("schemas")
    text = schemas.joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
