"""Framework jobs stopped after step K and resumed from that checkpoint through their own Trainers.

The slow tests run tests/jobs/resume-hf and tests/jobs/resume-lightning under the guest for real, as the
controller starts them: uninterrupted to step 14, stopped after step 6 (REPROBOX_STOP_AT; Lightning also
after step 10, the end of an epoch, which its ModelCheckpoint saves itself), and resumed from the step-6
checkpoint copied into a fresh outputs folder (REPROBOX_RESUME_FROM). The jobs' own code knows nothing of
either.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from reprobox.guest import frameworks, settings
from reprobox.guest.frameworks import Plan, plan_from_env

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "tests" / "jobs"
MAX_STEPS, STOP_AT = 14, 6  # the jobs' max_steps, and a step neither job saves a checkpoint after itself
HF_CHECKPOINT = f"checkpoint-{STOP_AT}"
PL_CHECKPOINT = f"ckpt/epoch=0-step={STOP_AT}.ckpt"  # 10 batches an epoch: step 6 is mid-epoch 0
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
HAS_LIGHTNING = importlib.util.find_spec("lightning") is not None


# -- what is patched, and where ---------------------------------------------------------------------


def test_nothing_is_planned_without_a_checkpoint_or_a_stop() -> None:
    assert plan_from_env({settings.RESUME_FRAMEWORK: "transformers"}) is None
    assert plan_from_env({settings.STOP_AT: "7"}) == Plan(resume_from=None, stop_at=7)
    assert plan_from_env({settings.RESUME_FROM: "/o/checkpoint-3"}) == Plan("/o/checkpoint-3", None)
    assert plan_from_env({settings.STOP_AT: "seven"}) is None  # reported on stderr, never raised


def _hooked_modules(**env: str) -> list[str]:
    script = (
        "import json, sys, reprobox.guest.hook as h; h.install(); print(json.dumps(sorted(m for m in "
        "sys.modules if m.startswith(('reprobox.guest.frameworks', 'transformers', 'lightning', "
        "'pytorch_lightning')))))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REPROBOX_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**clean, settings.HOOK_ACTIVE: "1", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stdout))


def test_the_hook_imports_no_framework_and_patches_only_when_asked() -> None:
    assert _hooked_modules() == []  # the hook's start-up cost is unchanged
    asked = {settings.RESUME_FRAMEWORK: "lightning", settings.STOP_AT: "3"}
    assert _hooked_modules(**asked) == ["reprobox.guest.frameworks"]  # watching, not importing


class FakeHFTrainer:
    def train(self, resume_from_checkpoint: Any = None, trial: Any = None) -> Any:
        return resume_from_checkpoint


class FakeLightningTrainer:
    def fit(
        self,
        model: Any,
        train_dataloaders: Any = None,
        val_dataloaders: Any = None,
        datamodule: Any = None,
        ckpt_path: Any = None,
    ) -> Any:
        return ckpt_path


def test_the_run_resumes_from_the_checkpoint_unless_the_caller_names_one() -> None:
    plan = Plan(resume_from="/out/checkpoint-6", stop_at=None)
    frameworks.patch_transformers(_module(Trainer=FakeHFTrainer), plan)
    frameworks.patch_transformers(_module(Trainer=FakeHFTrainer), plan)  # a second patch stacks nothing
    hf = FakeHFTrainer()
    assert hf.train() == hf.train(None) == hf.train(resume_from_checkpoint=None) == "/out/checkpoint-6"
    assert hf.train("/mine") == "/mine"
    assert hf.train(resume_from_checkpoint=True) is True  # "the last one in output_dir": theirs too
    frameworks.patch_lightning(_module(Trainer=FakeLightningTrainer), plan)
    pl = FakeLightningTrainer()
    assert pl.fit("model") == pl.fit("model", None, None, None, None) == "/out/checkpoint-6"
    assert pl.fit("model", None, None, None, "last") == pl.fit("model", ckpt_path="last") == "last"


def _module(**attributes: Any) -> ModuleType:
    module = ModuleType("fake_framework.trainer.trainer")
    module.__dict__.update(attributes)
    return module


SPAWNS_A_CHILD = """
import multiprocessing
from reprobox.guest import frameworks

print(__name__, frameworks.is_main_process(), flush=True)  # runs again in the child, as its __mp_main__


def child():
    print("child", frameworks.is_main_process(), flush=True)


if __name__ == "__main__":
    process = multiprocessing.get_context("spawn").Process(target=child)
    process.start()
    process.join()
"""


def test_only_the_main_process_counts_even_while_a_spawned_child_imports_the_job(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(SPAWNS_A_CHILD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:3] == ["__main__ True", "__mp_main__ False", "child False"]


# -- the jobs, run under the guest -------------------------------------------------------------------


@dataclass
class Run:
    outputs: Path
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> Run:
        assert self.returncode == 0, self.stderr[-4000:]
        return self


def _start(job: str, run_dir: Path, **extra: str) -> tuple[Path, subprocess.Popen[str]]:
    """`python -m reprobox.guest -- python train.py` with the variables the controller gives a run."""
    outputs = run_dir / "outputs"
    outputs.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPROBOX_")}
    env.update(
        {
            settings.RUN_DIR: str(run_dir),
            settings.OUTPUT_DIR: str(outputs),
            settings.SEED: "0",
            settings.DETERMINISM: json.dumps({"threads": 1}),  # as the jobs' job.yaml: one core each
            "HF_HUB_OFFLINE": "1",
            **extra,
        }
    )
    command = [sys.executable, "-m", "reprobox.guest", "--", sys.executable, str(JOBS / job / "train.py")]
    process = subprocess.Popen(
        command, cwd=run_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return outputs, process


def _finish(started: tuple[Path, subprocess.Popen[str]]) -> Run:
    outputs, process = started
    stdout, stderr = process.communicate(timeout=300)
    return Run(outputs, process.returncode, stdout, stderr)


def _resumable_copy(stopped: Run, checkpoint: str, run_dir: Path) -> Path:
    """The stopped run's checkpoint in a fresh outputs folder, where a resumed run finds it."""
    source, target = stopped.check().outputs / checkpoint, run_dir / "outputs" / checkpoint
    target.parent.mkdir(parents=True)
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    return target


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every run the slow tests look at, side by side where one needs no other (most of each is imports)."""
    root = tmp_path_factory.mktemp("framework-resume")
    hf = {settings.RESUME_FRAMEWORK: "transformers"}
    pl = {settings.RESUME_FRAMEWORK: "lightning"}
    jobs: dict[str, tuple[str, dict[str, str]]] = {}
    resumes: list[tuple[str, str, dict[str, str]]] = []  # (stopped run, its checkpoint, framework)
    if HAS_TRANSFORMERS:
        jobs |= {"hf-full": ("resume-hf", {}), "hf-stop": ("resume-hf", {**hf, settings.STOP_AT: "6"})}
        resumes.append(("hf-stop", HF_CHECKPOINT, hf))
    if HAS_LIGHTNING:
        jobs |= {
            "pl-full": ("resume-lightning", {}),
            "pl-stop": ("resume-lightning", {**pl, settings.STOP_AT: "6"}),
            "pl-stop-10": ("resume-lightning", {**pl, settings.STOP_AT: "10"}),
        }
        resumes.append(("pl-stop", PL_CHECKPOINT, pl))
    started = {name: _start(job, root / name, **env) for name, (job, env) in jobs.items()}
    done: dict[str, Run] = {}
    for stop, checkpoint, framework in resumes:  # each resumed run starts as soon as its stopped run ends
        done[stop] = _finish(started.pop(stop))
        name = stop.replace("stop", "resume")
        copy = _resumable_copy(done[stop], checkpoint, root / name)
        started[name] = _start(jobs[stop][0], root / name, **framework, **{settings.RESUME_FROM: str(copy)})
    return done | {name: _finish(process) for name, process in started.items()}


def _trainer_state(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "trainer_state.json").read_text()))


def _logged_steps(run: Run) -> int:
    """Optimizer steps the job trained in this process: the Trainer prints one loss line each."""
    return sum(line.startswith("{'loss'") for line in run.stdout.splitlines())


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path)


def _same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


needs_transformers = pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed")
needs_lightning = pytest.mark.skipif(not HAS_LIGHTNING, reason="lightning is not installed")


@pytest.mark.slow
@needs_transformers
def test_a_stopped_hf_trainer_saves_step_k_and_trains_no_further(runs: dict[str, Run]) -> None:
    full, stopped = runs["hf-full"].check(), runs["hf-stop"].check()
    state = _trainer_state(stopped.outputs / HF_CHECKPOINT)  # save_steps=4: this save is ours
    assert (state["global_step"], state["max_steps"]) == (STOP_AT, MAX_STEPS)
    assert state["stateful_callbacks"]["TrainerControl"]["args"]["should_training_stop"] is False
    assert sorted(p.name for p in stopped.outputs.glob("checkpoint-*")) == ["checkpoint-4", HF_CHECKPOINT]
    assert _logged_steps(stopped) == STOP_AT and _logged_steps(full) == MAX_STEPS
    # The model the job saved after train() returned is step 6's: nothing trained after the stop.
    final = _tensors(stopped.outputs / "model.safetensors")
    assert _same_tensors(final, _tensors(stopped.outputs / HF_CHECKPOINT / "model.safetensors"))
    # max_steps untouched: step 6 ran at the uninterrupted run's learning rate.
    history = _trainer_state(full.outputs / f"checkpoint-{MAX_STEPS}")["log_history"]
    assert state["log_history"][-1] == next(entry for entry in history if entry.get("step") == STOP_AT)


@pytest.mark.slow
@needs_transformers
def test_a_resumed_hf_trainer_continues_from_step_k_and_ends_exactly_as_the_uninterrupted_run(
    runs: dict[str, Run],
) -> None:
    full, resumed = runs["hf-full"].check(), runs["hf-resume"].check()
    assert _logged_steps(resumed) == MAX_STEPS - STOP_AT  # steps 7..14 only
    assert not (resumed.outputs / "checkpoint-4").exists()
    assert _trainer_state(resumed.outputs / f"checkpoint-{MAX_STEPS}")["global_step"] == MAX_STEPS
    # The Trainer restores RNG, optimizer and scheduler and skips the batches step 1..6 consumed (the
    # data are reshuffled by epoch from the seed): the resumed run is exact, file for file.
    final = _tensors(full.outputs / "model.safetensors")
    assert _same_tensors(final, _tensors(resumed.outputs / "model.safetensors"))
    last = f"checkpoint-{MAX_STEPS}"
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"):
        assert (full.outputs / last / name).read_bytes() == (resumed.outputs / last / name).read_bytes(), name
    # (training_args.bin differs: it pickles output_dir, another folder here.)


def _ckpt(path: Path) -> dict[str, Any]:
    return dict(torch.load(path, map_location="cpu", weights_only=False))


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_equal, a, b))
    return bool(a == b)


def _uninterrupted_lr_at(step: int) -> list[float]:
    """The job's schedule (LinearLR over max_steps=14), stepped as the uninterrupted run steps it."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    schedule = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=MAX_STEPS)
    for _ in range(step):
        optimizer.step()
        schedule.step()
    return [float(lr) for lr in schedule.get_last_lr()]


@pytest.mark.slow
@needs_lightning
def test_a_stopped_lightning_trainer_saves_step_k_under_its_default_name_and_trains_no_further(
    runs: dict[str, Run],
) -> None:
    stopped = runs["pl-stop"].check()
    assert sorted(p.name for p in (stopped.outputs / "ckpt").iterdir()) == [
        "epoch=0-step=4.ckpt",  # the job's ModelCheckpoint every 4 steps
        # Lightning ends an epoch stopped early as any other: its epoch-end hooks run, and the job's
        # epoch-end ModelCheckpoint saves the ended epoch beside ours, as "-v1" (the name is taken), which
        # `**/epoch=*-step={step}.ckpt` leaves out. An EarlyStopping stop does the same.
        "epoch=0-step=6-v1.ckpt",
        "epoch=0-step=6.ckpt",  # ours, right after step 6, mid-epoch: as every_n_train_steps saves one
    ]
    ckpt = _ckpt(stopped.outputs / PL_CHECKPOINT)
    assert ckpt["global_step"] == STOP_AT
    final = torch.load(stopped.outputs / "final.pt")  # saved by the job once fit() returned
    assert _equal(final, ckpt["state_dict"])
    (schedule,) = ckpt["lr_schedulers"]  # max_steps untouched: the schedule is the uninterrupted one's
    assert schedule["total_iters"] == MAX_STEPS and schedule["_last_lr"] == _uninterrupted_lr_at(STOP_AT)


@pytest.mark.slow
@needs_lightning
def test_stopping_where_model_checkpoint_saves_leaves_the_checkpoint_to_it(runs: dict[str, Run]) -> None:
    # Step 10 ends epoch 0, which the job's epoch-end ModelCheckpoint saves once the epoch is through:
    # the stopped run saves nothing of its own before that, and nothing after it, since it was saved.
    full, stopped = runs["pl-full"].check(), runs["pl-stop-10"].check()
    names = sorted(p.name for p in (stopped.outputs / "ckpt").iterdir())
    assert names == ["epoch=0-step=10.ckpt", "epoch=0-step=4.ckpt", "epoch=0-step=8.ckpt"]  # no "-v1"
    ours, theirs = (_ckpt(run.outputs / "ckpt/epoch=0-step=10.ckpt") for run in (stopped, full))
    for key in ("epoch", "global_step", "state_dict", "optimizer_states", "lr_schedulers", "loops"):
        assert _equal(ours[key], theirs[key]), key  # (callbacks differ: ModelCheckpoint keeps its dirpath)


@pytest.mark.slow
@needs_lightning
def test_a_resumed_lightning_trainer_continues_from_step_k_but_not_exactly(runs: dict[str, Run]) -> None:
    full, resumed = runs["pl-full"].check(), runs["pl-resume"].check()
    log = resumed.stdout + resumed.stderr
    assert f"Restored all states from the checkpoint at {resumed.outputs / PL_CHECKPOINT}" in log
    assert f"`max_steps={MAX_STEPS}` reached" in log
    # The checkpoints of steps 8 to 14 (epoch 1's from an epoch that ended), and no new one of step 4.
    saved = {p.name for p in (resumed.outputs / "ckpt").iterdir()} - {Path(PL_CHECKPOINT).name}
    assert saved == {p.name for p in (full.outputs / "ckpt").iterdir()} - {"epoch=0-step=4.ckpt"}
    after, before = (_ckpt(run.outputs / "ckpt/epoch=0-step=8.ckpt") for run in (resumed, full))
    assert _equal(after["loops"], before["loops"]) and _equal(after["lr_schedulers"], before["lr_schedulers"])
    # Not exact, and not reprobox's doing: a Lightning checkpoint holds no RNG state and no position in a
    # plain DataLoader. Resumed mid-epoch, Lightning starts the epoch's DataLoader over (it warns: "your
    # dataloader is not resumable"), with a shuffle and dropout masks drawn from the freshly seeded global
    # RNG rather than the uninterrupted run's, so the weights part from step 7 on.
    assert not _equal(after["state_dict"], before["state_dict"])
    assert not _equal(torch.load(resumed.outputs / "final.pt"), torch.load(full.outputs / "final.pt"))
