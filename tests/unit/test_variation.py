"""verify --vary without runs: the factor registry, how a value reaches a run, the matrix's verdict,
and the bisection over factor sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reprobox.compare import DIFFERENT, FAILED, IDENTICAL, Comparison
from reprobox.errors import UsageError
from reprobox.forensics.variation import (
    FACTORS,
    INVARIANT,
    SENSITIVE,
    UNSUPPORTED,
    FactorResult,
    VariationResult,
    factor_table,
    parse_factors,
    runtime_variations,
)
from reprobox.forensics.variation.bisect import smallest_combination
from reprobox.forensics.variation.change import Change, Machine, apply_change
from reprobox.forensics.variation.factors import BY_NAME, LOCALE_CANDIDATES, VARIED_TZ
from reprobox.forensics.variation.matrix import judge
from reprobox.guest import settings
from reprobox.jobfile import JobSpec
from reprobox.runner import RunOptions
from reprobox.runtimes.base import Variation


def make_job(tmp_path: Path, **overrides: object) -> JobSpec:
    job = JobSpec(job_file=tmp_path / "job.yaml", name="j", command=("python", "t.py"), code=tmp_path)
    return job.with_overrides(**overrides)


def machine(tmp_path: Path, cpus: int = 4, **job: object) -> Machine:
    return Machine(job=make_job(tmp_path, **job), cpus=cpus)


def test_every_factor_is_registered_with_a_documented_pair_of_values() -> None:
    names = [f.name for f in FACTORS]
    assert names == [
        "threads",
        "cpu-isa",
        "workers",
        "tz",
        "locale",
        "env-order",
        "hostname",
        "user",
        "cwd",
        "home",
        "umask",
        "file-order",
        "time",
        "world-size",
    ]
    for row in factor_table():
        assert row["doc"] and " vs " in row["values"] and row["needs"]


def test_the_container_runtimes_apply_every_variation_the_unsupported_hint_sends_users_to() -> None:
    from reprobox.runtimes.docker import DockerRuntime
    from reprobox.runtimes.podman import PodmanRuntime

    every = frozenset(vars(Variation()))
    assert DockerRuntime.variations == every and PodmanRuntime.variations == every


def test_runtime_assisted_factors_name_variation_fields() -> None:
    fields = set(vars(Variation()))
    for factor in FACTORS:
        assert set(factor.needs) <= fields, factor.name
    assert BY_NAME["hostname"].needs == ("hostname",)
    assert BY_NAME["threads"].needs == ()


def test_parse_factors_keeps_registry_order_and_refuses_unknown_names() -> None:
    assert [f.name for f in parse_factors("tz, threads")] == ["threads", "tz"]
    assert parse_factors("all") == FACTORS
    with pytest.raises(UsageError, match="unknown --vary factor colour"):
        parse_factors("threads,colour")
    with pytest.raises(UsageError):
        parse_factors(" , ")


def test_threads_vary_away_from_what_the_baseline_run_used(tmp_path: Path) -> None:
    m = machine(tmp_path, cpus=4)
    assert m.threads_used is None and BY_NAME["threads"].after_baseline
    ran = m.after_baseline({"software": {"threads": {"torch_intra_op": 4}}})
    varied = json.loads(BY_NAME["threads"].varied(ran).env[settings.DETERMINISM])
    assert (BY_NAME["threads"].baseline(ran), varied["threads"]) == ("threads=4", 1)
    assert varied["algorithms"] is True  # the rest of the job's determinism is kept
    assert BY_NAME["threads"].pin(ran) == "pin `determinism.threads: 4` in the job file"
    one = m.after_baseline({"software": {"threads": {"torch_intra_op": 1}}})  # one core's torch
    assert json.loads(BY_NAME["threads"].varied(one).env[settings.DETERMINISM])["threads"] == 4


def test_threads_vary_away_from_a_pinned_count(tmp_path: Path) -> None:
    from reprobox.guest.determinism import Determinism

    m = machine(tmp_path, cpus=2, determinism=Determinism(threads=2))
    varied = json.loads(BY_NAME["threads"].varied(m).env[settings.DETERMINISM])
    assert varied["threads"] == 1
    assert BY_NAME["threads"].pin(m) == "pin `determinism.threads: 2` in the job file"
    single = machine(tmp_path, cpus=1, determinism=Determinism(threads=1))
    assert json.loads(BY_NAME["threads"].varied(single).env[settings.DETERMINISM])["threads"] == 2


def test_every_baseline_is_the_plain_run_and_every_varied_value_differs_from_the_jobs_own(
    tmp_path: Path,
) -> None:
    """The baseline's runs are attested: nothing reprobox sets for the comparison may reach them."""
    m = machine(tmp_path, env={"TZ": "Europe/Paris", "REPROBOX_DATALOADER_WORKERS": "0"})
    assert BY_NAME["tz"].baseline(m) == "TZ=Europe/Paris"
    assert [c.env for c in BY_NAME["tz"].variants(m)] == [{"TZ": VARIED_TZ}]
    assert BY_NAME["tz"].pin(m) == "pin `env: {TZ: Europe/Paris}` in the job file"
    assert [c.env for c in BY_NAME["workers"].variants(m)] == [{"REPROBOX_DATALOADER_WORKERS": "2"}]
    plain = machine(tmp_path)
    assert BY_NAME["tz"].baseline(plain) == "the runtime's TZ"
    assert BY_NAME["tz"].pin(plain) == "pin `env: {TZ: UTC}` in the job file"
    assert BY_NAME["cpu-isa"].varied(plain).env == {"ATEN_CPU_CAPABILITY": "default"}
    # the job's own worker count is unknown: 0 and 2 are both tried, one of them differs from it
    assert [c.env for c in BY_NAME["workers"].variants(plain)] == [
        {"REPROBOX_DATALOADER_WORKERS": "0"},
        {"REPROBOX_DATALOADER_WORKERS": "2"},
    ]
    assert "set `env: {REPROBOX_DATALOADER_WORKERS: N}`" in BY_NAME["workers"].pin(plain)


def test_workers_applies_only_to_a_job_that_reads_the_variable(tmp_path: Path) -> None:
    from reprobox.forensics.variation.change import job_mentions
    from reprobox.forensics.variation.factors import WATCHED, WORKERS_VARIABLE

    workers = BY_NAME["workers"]
    (tmp_path / "train.py").write_text("print('no loader settings here')\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "notes").write_text(WORKERS_VARIABLE)  # hidden folders are not the job's code
    silent = Machine.probe(make_job(tmp_path), WATCHED)
    assert silent.mentioned == frozenset()
    assert workers.unsupported_reason(silent, "local", frozenset()) == (
        "not applicable (neither the job file nor its code reads $REPROBOX_DATALOADER_WORKERS)"
    )
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "loader.py").write_text(f"n = int(os.environ['{WORKERS_VARIABLE}'])\n")
    assert job_mentions(make_job(tmp_path), WATCHED) == {WORKERS_VARIABLE}
    (tmp_path / "conf" / "loader.py").unlink()
    through_command = make_job(tmp_path, command=("python", "t.py", f"--workers=${{{WORKERS_VARIABLE}}}"))
    assert workers.unsupported_reason(Machine.probe(through_command, WATCHED), "local", frozenset()) is None


def test_the_guest_picks_a_locale_installed_where_the_job_runs_that_differs_from_the_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reprobox.guest import variation as guest

    installed = {"C", "C.UTF-8", "fr_FR.UTF-8"}
    monkeypatch.setattr(guest, "_installed", lambda name: name in installed)
    change = BY_NAME["locale"].varied(machine(tmp_path))
    candidates = change.env[settings.LOCALES]
    assert candidates.split(":") == list(LOCALE_CANDIDATES)
    assert change.describe().startswith("LC_ALL=the first installed of de_DE.UTF-8, fr_FR.UTF-8")
    assert guest.choose_locale(candidates, {"LC_ALL": "C.UTF-8"}) == "fr_FR.UTF-8"
    assert guest.choose_locale(candidates, {"LANG": "fr_FR.utf8"}) == "C.UTF-8"
    installed.discard("fr_FR.UTF-8")
    assert guest.choose_locale(candidates, {"LC_ALL": "C.UTF-8"}) == "C"
    child: dict[str, str] = {"LC_ALL": "C.UTF-8"}
    guest.apply({settings.LOCALES: candidates, "LC_ALL": "C.UTF-8"}, child)
    assert child == {"LC_ALL": "C", "LANG": "C"}
    with pytest.raises(guest.VariationRefused, match="none of the locales"):
        guest.choose_locale("de_DE.UTF-8:C", {"LC_ALL": "C"})
    german_job = machine(tmp_path, env={"LC_ALL": "de_DE.UTF-8"})
    assert BY_NAME["locale"].baseline(german_job) == "LC_ALL=de_DE.UTF-8"
    assert BY_NAME["locale"].pin(german_job) == "pin `env: {LC_ALL: de_DE.UTF-8}` in the job file"


def test_a_real_locale_check_needs_no_stub() -> None:
    from reprobox.guest import variation as guest

    assert guest._installed("C") and not guest._installed("xx_NOWHERE.UTF-8")


def test_apply_change_sets_guest_env_variation_and_job_settings(tmp_path: Path) -> None:
    job = make_job(tmp_path, env={"A": "1", "B": "2", "C": "3"})
    options = RunOptions(extra_env={"KEEP": "x"})
    change = Change(env={"TZ": "UTC0"}).merged(
        Change(variation={"hostname": "h"}, reverse_env=True, nproc_per_node=4)
    )
    new_job, new_options = apply_change(job, options, change)
    assert list(new_job.env) == ["C", "B", "A"]
    assert new_job.launcher.nproc_per_node == 4
    assert new_options.extra_env == {"KEEP": "x", "TZ": "UTC0"}
    assert new_options.variation == Variation(hostname="h")
    assert (job.env, options.variation) == ({"A": "1", "B": "2", "C": "3"}, Variation())  # untouched
    assert "TZ=UTC0" in change.describe() and "hostname=h" in change.describe()


def test_unsupported_factors_are_named_with_the_runtime(tmp_path: Path) -> None:
    m = machine(tmp_path)
    assert BY_NAME["hostname"].unsupported_reason(m, "slurm", frozenset()) == (
        "unsupported on slurm (vary it with --runtime docker or podman)"
    )
    assert BY_NAME["hostname"].unsupported_reason(m, "local", frozenset({"hostname"})) is None
    assert BY_NAME["tz"].unsupported_reason(m, "slurm", frozenset()) is None
    assert "torchrun" in (BY_NAME["world-size"].unsupported_reason(m, "local", frozenset()) or "")

    class Bare:
        name = "bare"

    class Able:
        name = "able"
        variations = frozenset({"umask"})

    assert runtime_variations(Bare()) == frozenset()  # type: ignore[arg-type]
    assert runtime_variations(Able()) == frozenset({"umask"})  # type: ignore[arg-type]


def comparison(verdict: str, **fields: object) -> Comparison:
    c = Comparison(verdict, ["a", "b"], **fields)  # type: ignore[arg-type]
    c.sentence = f"{verdict} sentence"
    return c


def test_judge_reads_files_tensors_values_max_difference_and_first_step() -> None:
    diff = comparison(
        DIFFERENT,
        differences=[
            {"checkpoint": "model.pt", "name": "weight", "max_abs": 1e-7},
            {"checkpoint": "model.pt", "name": "bias", "max_abs": 3e-7},
        ],
        value_differences=[{"checkpoint": "metrics.json", "name": "snapshot", "a": "x", "b": "y"}],
        first_divergence={"step": 3},
    )
    row = judge(FactorResult("threads", "", "1 vs 2"), diff)
    assert row.status == SENSITIVE
    assert row.files == ["metrics.json", "model.pt"]
    assert row.tensors == ["weight", "bias"]
    assert row.values_changed == ["snapshot"]
    assert (row.max_abs, row.first_step) == (3e-7, 3)
    assert judge(FactorResult("tz", "", ""), comparison(IDENTICAL)).status == INVARIANT
    failed = judge(FactorResult("tz", "", ""), comparison(FAILED, notes=["run x failed: boom"]))
    assert (failed.status, failed.reason) == ("failed", "run x failed: boom")


def result_with(*rows: FactorResult, baseline: str = IDENTICAL) -> VariationResult:
    return VariationResult(["a", "b"], comparison(baseline), list(rows), runtime="local")


def test_verdict_names_sensitive_factors_and_what_to_pin_first() -> None:
    rows = (
        FactorResult("threads", SENSITIVE, "", pin="pin `determinism.threads: 1` in the job file"),
        FactorResult("tz", INVARIANT, ""),
        FactorResult("hostname", UNSUPPORTED, "", reason="unsupported on slurm"),
    )
    result = result_with(*rows)
    assert result.sentence() == (
        "sensitive to threads: pin `determinism.threads: 1` in the job file; invariant to tz; "
        "not varied: hostname (unsupported on slurm)"
    )
    assert result.sensitive and not result.failed
    data = result.to_json()
    assert (data["sensitive"], data["invariant"], data["unsupported"]) == (["threads"], ["tz"], ["hostname"])
    assert data["factors"][0]["factor"] == "threads"


def test_all_invariant_is_not_sensitive_and_says_so() -> None:
    result = result_with(FactorResult("tz", INVARIANT, ""), FactorResult("threads", INVARIANT, ""))
    assert not result.sensitive and not result.failed
    assert result.sentence() == "invariant to tz, threads"


def test_a_baseline_that_differs_from_itself_blames_no_factor() -> None:
    result = result_with(FactorResult("tz", "undecided", ""), baseline=DIFFERENT)
    assert result.sensitive
    assert result.sentence().startswith("no factor can be blamed: the baseline is not reproducible")
    assert result_with(baseline=FAILED).sentence().startswith("no verdict: the baseline failed")


def test_a_combination_is_named_when_no_single_factor_is() -> None:
    result = result_with(FactorResult("tz", INVARIANT, ""), FactorResult("locale", INVARIANT, ""))
    result.combination = ["tz", "locale"]
    assert result.sensitive
    assert "sensitive to the combination tz + locale" in result.sentence()
    assert result.to_json()["combination"]["factors"] == ["tz", "locale"]


def test_bisection_finds_a_smallest_combination_asking_each_set_once() -> None:
    asked: list[tuple[str, ...]] = []

    def differs(subset: tuple[str, ...]) -> bool:
        asked.append(subset)
        return {"b", "e"} <= set(subset)

    assert smallest_combination(tuple("abcdefgh"), differs) == ("b", "e")
    assert len(asked) == len(set(asked))
    assert len(asked) < 2**8  # far fewer runs than every subset


def test_bisection_narrows_to_one_half_when_it_suffices() -> None:
    assert smallest_combination(list("abcd"), lambda s: "d" in s) == ("d",)
    assert smallest_combination(list("ab"), lambda s: set(s) == {"a", "b"}) == ("a", "b")
    three = smallest_combination(list("abcdef"), lambda s: {"a", "c", "f"} <= set(s))
    assert three == ("a", "c", "f")


def test_run_specific_values_the_baseline_kept_equal_make_a_factor_sensitive() -> None:
    stamp = {"checkpoint": "metrics.json", "name": "snapshot", "a": "22:13", "b": "03:43", "reason": "time"}
    varied = comparison(IDENTICAL, run_specific=[stamp])
    row = judge(FactorResult("tz", "", ""), varied)
    assert (row.status, row.files, row.values_changed) == (SENSITIVE, ["metrics.json"], ["snapshot"])
    assert row.note.startswith("bytes, not tensors")
    noisy = judge(FactorResult("tz", "", ""), varied, frozenset({("metrics.json", "snapshot")}))
    assert noisy.status == INVARIANT  # the baseline's own rerun changed it too: not the factor's doing


def test_the_attestation_keeps_the_matrix_and_its_reader_checks_it(tmp_path: Path) -> None:
    from reprobox.forensics.variation import variation_entry
    from reprobox.records.attestation import FieldChecker

    rows = [
        FactorResult("threads", INVARIANT, "1 vs 4", baseline="threads=1", varied="threads=4"),
        FactorResult("tz", SENSITIVE, "UTC0 vs RBX", files=["m.json"], values_changed=["when"]),
        FactorResult("hostname", UNSUPPORTED, "x vs y", reason="unsupported on slurm"),
        FactorResult("world-size", UNSUPPORTED, "n vs 2n", reason="not applicable", applicable=False),
    ]
    result = VariationResult(["a", "b"], comparison(IDENTICAL), rows, runtime="local")
    entry = variation_entry(result)
    assert [r["status"] for r in entry["factors"]] == [
        "invariant",
        "sensitive",
        "unsupported",
        "not applicable",
    ]
    assert (entry["invariant"], entry["sensitive"], entry["combination"]) == (["threads"], ["tz"], None)
    assert entry["factors"][1]["files"] == ["m.json"] and "files" not in entry["factors"][0]
    checker = FieldChecker(tmp_path / "a.json")
    checker.check_variation(json.loads(json.dumps(entry)))
    checker.check_variation(None)  # an attestation of a plain verify has none
    assert checker.problems == []
    entry["factors"][0]["status"] = "fine"
    del entry["factors"][1]["varied"]
    checker.check_variation(entry)
    assert [p.field for p in checker.problems] == [
        "predicate.variation.factors.0.status",
        "predicate.variation.factors.1.varied",
    ]


def test_reproduce_says_which_differing_factors_the_author_verified(tmp_path: Path) -> None:
    from reprobox.attest import Attestation
    from reprobox.reproduce._variation import differing_factors, variation_notes
    from reprobox.stackdiff import FieldDifference

    rows = [
        {"factor": "threads", "status": "invariant"},
        {"factor": "tz", "status": "invariant"},
        {"factor": "cpu-isa", "status": "sensitive"},
    ]
    attestation = Attestation(
        tmp_path / "a", {"predicate": {"variation": {"runtime": "local", "factors": rows}}}
    )
    threads = FieldDifference("software.threads.torch_intra_op", "torch intra-op threads", 1, 4, True, 50)
    isa = FieldDifference(
        "software.torch.cpu_capability", "torch CPU kernel level", "AVX2", "AVX512", True, 42
    )
    host = FieldDifference("hardware.hostname", "hostname", "a", "b", False, 223)
    assert differing_factors([host, isa, threads]) == ["threads", "cpu-isa", "hostname"]
    notes, clause = variation_notes(attestation, [threads, isa, host])
    assert clause == "the author verified the result invariant to threads and found it sensitive to cpu-isa"
    assert notes == [
        "the author verified the result invariant to threads and tz (reprobox verify --vary)",
        "the author found the result sensitive to cpu-isa",
        "threads differs here, which the author verified cannot change the result",
        "cpu-isa differs here, and the author found the result sensitive to it: pin it as the author had it",
        "hostname differs here, and the author never varied it, so whether it matters is unknown",
    ]
    plain = Attestation(tmp_path / "a", {"predicate": {}})
    assert variation_notes(plain, [threads]) == ([], "")  # an attestation of a plain verify
