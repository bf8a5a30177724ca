"""`attest`, `reproduce`, `pack` and `keygen`: publishing a result, and checking a published one."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from reprobox import attest, bundle, reproduce
from reprobox.commands.common import add_command, add_output_flags, check_runs_dir
from reprobox.commands.targets import check_output_file, check_output_folder
from reprobox.errors import EXIT_OK
from reprobox.records.manifest import read_record
from reprobox.reproduce.report import reproduce_text
from reprobox.resume import spot
from reprobox.runner import runs_dir_default

if TYPE_CHECKING:
    from reprobox.commands.output import Output

ATTEST_EPILOG = """\
examples:
  reprobox attest runs/tiny-mlp/RUN_A runs/tiny-mlp/RUN_B      attest two bit-identical runs
  reprobox attest runs/tiny-mlp/RUN_A --sign ~/.config/reprobox/signing.key
  reprobox attest runs/tiny-mlp/RUN_A -o paper/reprobox.attestation.json
  reprobox attest runs/tiny-mlp/RUN_A RUN_B --show | less       exactly what would be published

Writes reprobox.attestation.json next to the job file (or -o PATH): an in-toto Statement whose
subject is the checkpoints and whose predicate holds what a reviewer needs to rerun the job (job
file, code digests, image, seed, thread counts, fingerprint, checkpoint hashes). Commit it with the
code. `reprobox verify` writes it too when its runs are bit-identical.
With --sign the file is a DSSE envelope (checked by securesystemslib and in-toto tools too) and, with
an ECDSA key (the `reprobox keygen` default), the checkpoints get an OpenSSF model signature beside it
(reprobox.model.sig, which `model_signing verify key` checks); publish the key's .pub next to them.
It is safe to publish: paths are relative to the code folder, and the host name, user name, home
folder, runs folder and interpreter path are withheld (the fingerprint keeps every stack fact that
decides the numerics). --show prints the statement and writes nothing.
"""

REPRODUCE_EPILOG = """\
examples:
  reprobox reproduce reprobox.attestation.json                  in a clone of the paper's code
  reprobox reproduce paper/reprobox.attestation.json --runs 2   two runs: also catches nondeterminism here
  reprobox reproduce bundle.tar                                 air-gapped: image and code from the bundle
  reprobox reproduce ATT --verify-signature author.pub          refuse an attestation not signed by them
  reprobox reproduce ATT --published ckpts/ --tolerance 1e-5    accept a small difference on another stack
  reprobox reproduce ATT --threads 1                            see whether the thread count matters
  reprobox reproduce ATT --accept claims                        pass when the paper's numbers hold
  reprobox reproduce ATT --seeds 3                              the mean ± std over the first 3 seeds too
  reprobox reproduce ATT --published ckpts/ --segments 3        replay 3 segments of a long run, not all

The code folder defaults to the folder around the attestation when the job file sits next to it
(where reprobox puts it), else the current directory. Nothing runs until the code (file by file) and
the image (lock digest and labels) match the attestation. The author's seed, determinism flags,
thread count, world size and environment are replayed. One sentence says what happened, led by the
highest grade that holds (bit-identical, tensors-equal, within-tolerance, claims-hold, not-reproduced):
  bit-identical to the published checkpoints                exit 0
  same stack, different result: a real nondeterminism       exit 1
  different stack: bitwise equality not expected; ...       exit 1 (0 with --tolerance met)
  every claim holds (...), but the bits differ: ...         exit 1 (0 with --accept claims)
  not reproduced: val_acc 0.91 (published 0.975, ...)       exit 1
  the code differs / the image differs                      exit 2 / exit 4
Claims are the numbers the job file lists under `claims:` (the paper's table); each is compared with
the value the attestation records, within its tolerance.
With --segments M (a job with a resume: section, and the author's checkpoints from --published or
the bundle), M segments between the published resumable checkpoints are drawn (seeded by their
hashes, or --segments-seed), each replayed from its published start checkpoint (checked against the
attestation) and judged against the published checkpoint at its end: exit 0 when every one matches,
1 when one differs, 3 when a replay fails. One fabricated segment among n is caught with probability
M/n.
A Markdown and an HTML report go to runs/reproductions/<job>-<time>/ (or --report-dir); when the
author ran `verify --vary`, they show the author's matrix as a table, with whether each factor
differs here.
"""

PACK_EPILOG = """\
examples:
  reprobox pack reprobox.attestation.json -o ../paper-bundle.tar
  reprobox pack ATT -o bundle.tar --published runs/tiny-mlp/latest   with the author's checkpoints
  reprobox pack ATT -o bundle.tar --data                             with the job's data sources

The bundle holds the attestation, the attested code, the job file, the image (`docker save`) and,
optionally, the author's checkpoints and the data; bundle.tar.sha256 next to it records its digest.
On a machine with no registry or network: reprobox reproduce bundle.tar
"""

KEYGEN_EPILOG = """\
examples:
  reprobox keygen                         ~/.config/reprobox/signing.key and signing.key.pub
  reprobox keygen -o keys/paper.key
  reprobox keygen --type ed25519          an Ed25519 key: signs the attestation, not the model

Both files are PEM (PKCS#8 and SubjectPublicKeyInfo), as securesystemslib, model_signing, cosign and
openssl read them. ECDSA P-256 (the default) signs the attestation and the model (OpenSSF model
signing takes NIST curves only). Publish the .pub file (in the paper or the repository); keep the
other one private.
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    att = add_command(commands, "attest", "write the attestation a reviewer reproduces", ATTEST_EPILOG)
    att.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories (bit-identical)")
    att.add_argument(
        "-o",
        "--output",
        type=Path,
        help=f"where to write it (default: {attest.ATTESTATION_NAME} next to the job file)",
    )
    att.add_argument(
        "--sign",
        type=Path,
        metavar="KEY",
        help="sign with this private key (reprobox keygen); an ECDSA key also signs the model",
    )
    att.add_argument(
        "--show",
        action="store_true",
        help="print the statement exactly as it would be published, and write nothing",
    )
    add_output_flags(att)
    att.set_defaults(handler=attest_command)

    rep = add_command(
        commands,
        "reproduce",
        "rerun a published job and say whether its checkpoints reproduce",
        REPRODUCE_EPILOG,
    )
    rep.add_argument(
        "source", type=Path, metavar="ATTESTATION", help="reprobox.attestation.json, or a bundle .tar"
    )
    rep.add_argument("--code", type=Path, metavar="DIR", help="the paper's code folder (default: see below)")
    rep.add_argument("--runs", type=int, default=1, metavar="N", help="runs here (default: 1)")
    rep.add_argument(
        "--runtime", choices=("docker", "podman", "local"), help="where to run (default: as the author did)"
    )
    rep.add_argument(
        "--runs-dir", type=Path, default=runs_dir_default(), help="where run directories go (default: ./runs)"
    )
    rep.add_argument(
        "--published",
        type=Path,
        metavar="DIR",
        help="the author's checkpoints (run or outputs folder), for tensor-level numbers",
    )
    rep.add_argument(
        "--tolerance",
        type=float,
        metavar="X",
        help="on a different stack, exit 0 when no weight differs by more than X",
    )
    rep.add_argument(
        "--threads", type=int, metavar="N", help="run with N threads instead of the author's count"
    )
    rep.add_argument(
        "--seeds",
        type=int,
        metavar="N",
        help="also rerun the first N seeds the author verified (verify --seeds) and compare each claim's "
        "spread: each mean must lie within the other's mean ± 2 std, widened by the claim's tolerance",
    )
    rep.add_argument(
        "--accept",
        choices=("bits", "claims"),
        help="what passes on a different stack: the bits (default, or the job file's `accept:`), or "
        "every claim of the job file holding within its tolerance",
    )
    rep.add_argument(
        "--verify-signature",
        type=Path,
        metavar="PUBKEY",
        help="require the author's signature (their .pub) on the attestation and on the model beside it",
    )
    rep.add_argument(
        "--segments",
        metavar="M|all",
        help="replay M segments of the run between its published resumable checkpoints (or all), "
        "instead of the whole run",
    )
    rep.add_argument(
        "--segments-seed",
        type=int,
        metavar="S",
        help="draw the segments with this seed (default: from the published checkpoints' hashes)",
    )
    rep.add_argument(
        "--parallel", type=int, default=1, metavar="K", help="with --segments: K replays side by side"
    )
    rep.add_argument("--bundle-sha256", metavar="HEX", help="the bundle digest the author published")
    rep.add_argument("--report-dir", type=Path, metavar="DIR", help="where the reports go")
    rep.add_argument("--base-image", help="base image for a rebuild (default: the attested one)")
    rep.add_argument(
        "--wheelhouse", type=Path, help="local wheels for a rebuild (default: $REPROBOX_WHEELHOUSE)"
    )
    add_output_flags(rep)
    rep.set_defaults(handler=reproduce_command)

    pck = add_command(
        commands, "pack", "bundle an attestation with its code and image for air-gapped review", PACK_EPILOG
    )
    pck.add_argument("attestation", type=Path, metavar="ATTESTATION", help="reprobox.attestation.json")
    pck.add_argument("-o", "--output", type=Path, required=True, help="the bundle to write, e.g. bundle.tar")
    pck.add_argument(
        "--code", type=Path, metavar="DIR", help="the code folder (default: around the attestation)"
    )
    pck.add_argument(
        "--published",
        type=Path,
        metavar="DIR",
        help="include the author's checkpoints (run or outputs folder)",
    )
    pck.add_argument("--data", action="store_true", help="include the job's data sources")
    add_output_flags(pck)
    pck.set_defaults(handler=pack_command)

    key = add_command(commands, "keygen", "make a key pair to sign attestations and models", KEYGEN_EPILOG)
    key.add_argument(
        "-o",
        "--output",
        type=Path,
        default=attest.DEFAULT_KEY,
        help=f"private key path (default: {attest.DEFAULT_KEY})",
    )
    key.add_argument(
        "--type",
        choices=attest.KEY_TYPES,
        default=attest.ECDSA_P256,
        help=f"the key's algorithm (default: {attest.ECDSA_P256})",
    )
    key.add_argument("--force", action="store_true", help="replace an existing key")
    add_output_flags(key)
    key.set_defaults(handler=keygen_command)


def attest_command(args: argparse.Namespace, out: Output) -> int:
    if args.output is not None and not args.show:
        check_output_file(args.output, "-o", example="reprobox.attestation.json")
    records = [read_record(path) for path in args.runs]
    statement = attest.build_attestation(records)
    if args.show:
        attest.check_statement(statement)
        out.result(statement, json.dumps(statement, indent=2, sort_keys=True, ensure_ascii=False))
        return EXIT_OK
    job_file = records[0].job_file or Path("job.yaml")
    target = args.output or attest.attestation_path_for(job_file)
    check_output_file(target, "-o", example="reprobox.attestation.json")  # the default: beside the job file
    key = args.sign.expanduser() if args.sign else None
    model_signature = attest.model_signature_path_for(target) if key and attest.signs_models(key) else None
    if model_signature is not None:
        check_output_file(model_signature, "-o", example="reprobox.attestation.json")
    attest.write_attestation(target, statement, key=key, checkpoints=records[0].output_dir)
    predicate = statement["predicate"]
    data = {
        "attestation": str(target),
        "signed": args.sign is not None,
        "model_signature": str(model_signature) if model_signature else None,
        "verified_runs": predicate["runs"]["verified"],
        "checkpoints": statement["subject"],
        "code_sha256": predicate["code"]["sha256"],
        "image": (predicate.get("image") or {}).get("reference"),
    }
    runs = predicate["runs"]["verified"]
    plural = "s" if runs != 1 else ""
    lines = [f"wrote {target} ({runs} verified run{plural}, {len(statement['subject'])} checkpoint(s))"]
    if runs == 1:
        lines.append("  note: one run proves nothing about reruns; `reprobox verify` runs the job twice")
    if model_signature is not None:
        lines.append(f"  the checkpoints' OpenSSF model signature: {model_signature}")
    elif key is not None:
        lines.append(
            "  note: no model signature: OpenSSF model signing takes ECDSA keys; "
            "make one with `reprobox keygen --type ecdsa-p256`"
        )
    lines.append(f"  a reviewer runs: reprobox reproduce {target}")
    out.result(data, "\n".join(lines))
    return EXIT_OK


def reproduce_command(args: argparse.Namespace, out: Output) -> int:
    check_runs_dir(args.runs_dir)
    if args.report_dir is not None:
        check_output_folder(
            args.report_dir, "--report-dir", "pass a folder you can write, e.g. --report-dir ./review"
        )
    options = reproduce.ReproduceOptions(
        code=args.code,
        runs=args.runs,
        runtime=args.runtime,
        runs_dir=args.runs_dir,
        published=args.published,
        tolerance=args.tolerance,
        threads=args.threads,
        accept=args.accept,
        seeds=args.seeds,
        verify_signature=args.verify_signature,
        bundle_sha256=args.bundle_sha256,
        report_dir=args.report_dir,
        base_image=args.base_image,
        wheelhouse=args.wheelhouse,
        echo=out.job_output(),
        segments=spot.parse_count(args.segments) if args.segments is not None else None,
        segments_seed=args.segments_seed,
        parallel=args.parallel,
    )
    result = reproduce.reproduce(args.source, options)
    out.result(result.to_json(), reproduce_text(result))
    return result.exit_code


def pack_command(args: argparse.Namespace, out: Output) -> int:
    for target in (args.output, bundle.digest_file_for(args.output)):  # the bundle and its digest beside it
        check_output_file(target, "-o", make_folders=True, example="../bundle.tar")
    result = bundle.pack(
        args.attestation,
        args.output,
        code=args.code,
        published=args.published,
        data=args.data,
    )
    text = (
        f"wrote {result.path} ({result.size / 1e6:.1f} MB, sha256 {result.sha256})\n"
        f"  digest recorded in {result.digest_file}; publish it with the bundle\n"
        f"  image: {result.image or 'none (the job ran without a container)'}; "
        f"author's checkpoints: {'included' if result.published else 'not included (--published DIR)'}\n"
        f"  a reviewer runs: reprobox reproduce {result.path.name}"
    )
    out.result(result.to_json(), text)
    return EXIT_OK


def keygen_command(args: argparse.Namespace, out: Output) -> int:
    path = args.output.expanduser()
    for target in (path, path.with_name(path.name + ".pub")):  # the private key and the public one beside it
        check_output_file(target, "-o", make_folders=True, example="keys/paper.key")
    private, public = attest.generate_key(path, key_type=args.type, force=args.force)
    keyid = attest.key_id(attest.load_public_key(public))
    out.result(
        {"private_key": str(private), "public_key": str(public), "keyid": keyid, "type": args.type},
        f"wrote {private} (keep it private) and {public} (publish it), {args.type}, key id {keyid[:16]}\n"
        f"  sign with: reprobox attest RUN_DIR... --sign {private}\n"
        f"  reviewers check with: reprobox reproduce ATTESTATION --verify-signature {public.name}",
    )
    return EXIT_OK
