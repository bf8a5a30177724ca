"""The attestation an author publishes: verified runs -> one in-toto Statement a reviewer can replay.

The file is an in-toto Statement v1 (``_type: https://in-toto.io/Statement/v1``): its ``subject`` is
the checkpoints with their sha256, its ``predicate`` (type ``PREDICATE_TYPE``) what a reviewer needs to
run the same job again and judge the result (see ``_statement``). A signed attestation is a DSSE
envelope around the Statement, signed with an ECDSA P-256 or Ed25519 key (see ``_signing``, ``_keys``);
an unsigned attestation is the Statement itself, indented for people. Beside a signed one, the model's
signature in the OpenSSF model-signing format covers the checkpoint files (see ``_model_signature``).
The predicate's JSON Schema ships in the package (``predicate_schema``).
"""

from __future__ import annotations

from reprobox.attest._code import (
    code_changes,
    job_file_in,
    locate_code,
)
from reprobox.attest._file import (
    check_statement,
    read_attestation,
    write_attestation,
)
from reprobox.attest._keys import (
    ECDSA_P256,
    ED25519,
    KEY_TYPES,
    generate_key,
    is_ecdsa_key,
    key_facts,
    key_id,
    load_private_key,
    load_public_key,
)
from reprobox.attest._model import (
    ATTESTATION_NAME,
    DEFAULT_KEY,
    attestation_in,
    attestation_path_for,
)
from reprobox.attest._model_signature import (
    check_model_signature,
    model_signature_path_for,
    signs_models,
)
from reprobox.attest._public import names_the_machine, public_fingerprint
from reprobox.attest._schema import SCHEMA_FILE, predicate_schema
from reprobox.attest._signing import canonical_json
from reprobox.attest._statement import (
    build_attestation,
)
from reprobox.records.attestation import (
    PREDICATE_TYPE,
    PREDICATE_TYPE_PREFIX,
    Attestation,
)

__all__ = [
    "ATTESTATION_NAME",
    "DEFAULT_KEY",
    "ECDSA_P256",
    "ED25519",
    "KEY_TYPES",
    "PREDICATE_TYPE",
    "PREDICATE_TYPE_PREFIX",
    "SCHEMA_FILE",
    "Attestation",
    "attestation_in",
    "attestation_path_for",
    "build_attestation",
    "canonical_json",
    "check_model_signature",
    "check_statement",
    "code_changes",
    "generate_key",
    "is_ecdsa_key",
    "job_file_in",
    "key_facts",
    "key_id",
    "load_private_key",
    "load_public_key",
    "locate_code",
    "model_signature_path_for",
    "names_the_machine",
    "predicate_schema",
    "public_fingerprint",
    "read_attestation",
    "signs_models",
    "write_attestation",
]
