"""Running a recorded run's job again (a drill-down replay, a segment spot-check): its job file and code
folder as they are now, refused when either has changed since the run, since replaying other code would
prove nothing about the run."""

from __future__ import annotations

from pathlib import Path

from reprobox import codetree, jobfile
from reprobox.errors import UsageError
from reprobox.guest.filehash import file_sha256
from reprobox.jobfile import JobSpec
from reprobox.records.manifest import RunRecord


def job_of(records: list[RunRecord]) -> JobSpec:
    """The job two runs ran, from its job file as it is now, refused when the file has changed."""
    a, b = records
    if a.job_name != b.job_name:
        raise UsageError(
            f"{a.run_dir} and {b.run_dir} are runs of different jobs ({a.job_name}, {b.job_name}); "
            "explain two runs of one job"
        )
    if a.seed != b.seed:
        raise UsageError(
            f"the runs used different seeds ({a.seed} and {b.seed}): that explains their difference; "
            "explain two runs of one seed"
        )
    return job_of_run(a)


def job_of_run(a: RunRecord) -> JobSpec:
    """The job a run ran, from its job file as it is now, refused when the file has changed."""
    job_file = a.job_file
    if job_file is None or not job_file.is_file():
        raise UsageError(
            f"{a.run_dir}: its job file {job_file or '(not recorded)'} is gone; replaying needs it, "
            "restore it where it was"
        )
    if a.job_file_sha256 and file_sha256(job_file) != a.job_file_sha256:
        raise UsageError(
            f"{job_file} has changed since {a.run_dir} ran; restore the version it ran (its sha256 is "
            f"{a.job_file_sha256[:16]}...) to replay it"
        )
    job = jobfile.load_job(job_file)
    if a.seed is not None:
        job = job.with_overrides(seed=a.seed)
    return job


def check_same_code(record: RunRecord, job: JobSpec, runs_dir: Path) -> None:
    """The code folder must hold what the runs ran: replaying other code would prove nothing."""
    recorded = record.code_sha256
    if not recorded:
        return
    now = codetree.digest_tree(job.code, exclude=(runs_dir,)).digest
    if now != recorded:
        raise UsageError(
            f"the code in {job.code} has changed since {record.run_dir} ran (code digest {recorded[:12]}, "
            f"now {now[:12]}); check out what the runs ran to replay them"
        )
