"""Resume and stop Hugging Face Trainer and Lightning jobs through their own Trainers, with no change to them.

A job file with `resume: {framework: ...}` gives no arguments for resuming and stopping: the job's
Trainer is patched instead, in the job's main process, the moment the module that defines it is
imported. `Trainer.train()` / `Trainer.fit()` then start from REPROBOX_RESUME_FROM unless the caller
names a checkpoint itself, and a callback that joins every Trainer as it starts has it save its own
checkpoint after optimizer step REPROBOX_STOP_AT and stop there. Step limits are never touched: they
shape LR schedules.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import multiprocessing
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from reprobox.guest import settings
from reprobox.guest.post_import import when_imported

TRANSFORMERS_TRAINER = "transformers.trainer"
LIGHTNING_TRAINERS = ("lightning.pytorch.trainer.trainer", "pytorch_lightning.trainer.trainer")
PATCHED = "_reprobox_resume_patched"


@dataclass(frozen=True)
class Plan:
    """Where the run starts from (absolute) and the step it stops after; None: as the job itself does."""

    resume_from: str | None
    stop_at: int | None


def plan_from_env(env: Mapping[str, str]) -> Plan | None:
    """What the controller asked of this framework job, or None when there is nothing to do."""
    stop_at = None
    raw = env.get(settings.STOP_AT)
    if raw:
        try:
            stop_at = int(raw)
        except ValueError:
            sys.stderr.write(f"reprobox: ignoring {settings.STOP_AT}={raw!r}: not an optimizer step\n")
    plan = Plan(resume_from=env.get(settings.RESUME_FROM) or None, stop_at=stop_at)
    return plan if plan.resume_from or plan.stop_at is not None else None


def install(env: Mapping[str, str]) -> None:
    """Watch for the named framework's Trainer module; never imports a framework itself."""
    plan = plan_from_env(env)
    framework = env.get(settings.RESUME_FRAMEWORK)
    if plan is None:
        return
    if framework == "transformers":
        when_imported(TRANSFORMERS_TRAINER, _in_main_process_only(patch_transformers, plan))
    elif framework == "lightning":
        for name in LIGHTNING_TRAINERS:
            when_imported(name, _in_main_process_only(patch_lightning, plan))
    else:
        sys.stderr.write(
            f"reprobox: ignoring {settings.RESUME_FRAMEWORK}={framework!r}: not a known framework\n"
        )


def _in_main_process_only(
    patch: Callable[[ModuleType, Plan], None], plan: Plan
) -> Callable[[ModuleType], None]:
    def patch_if_main(module: ModuleType) -> None:
        if is_main_process():
            patch(module, plan)

    return patch_if_main


def is_main_process() -> bool:
    """False in DataLoader workers and other multiprocessing children, which train nothing themselves.

    A spawned child imports the job's modules before it learns its parent, but after it takes its name.
    """
    return (
        multiprocessing.parent_process() is None and multiprocessing.current_process().name == "MainProcess"
    )


def _claim(trainer_class: Any) -> bool:
    """True the first time a Trainer class is seen: patching twice would stack the wrappers."""
    if trainer_class.__dict__.get(PATCHED):
        return False
    setattr(trainer_class, PATCHED, True)
    return True


def _entry(
    method: Callable[..., Any], parameter: str, plan: Plan, add_stop: Callable[[Any, int], None]
) -> Callable[..., Any]:
    """`train`/`fit` given the stop callback, and `parameter` (the checkpoint) where the caller passed none.

    The callback joins on the way in rather than in `__init__`: tools that read the constructor's
    signature to build command lines (LightningCLI, HfArgumentParser) then see it untouched.
    """
    signature = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if plan.stop_at is not None:
            add_stop(self, plan.stop_at)
        if not plan.resume_from:
            return method(self, *args, **kwargs)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:  # let the framework word the caller's mistake
            return method(self, *args, **kwargs)
        if bound.arguments.get(parameter) is None:
            sys.stderr.write(f"reprobox: resuming from {plan.resume_from}\n")
            bound.arguments[parameter] = plan.resume_from
        return method(*bound.args, **bound.kwargs)

    return wrapper


# -- Hugging Face transformers ----------------------------------------------------------------------


def patch_transformers(module: ModuleType, plan: Plan) -> None:
    """Patch `transformers.trainer.Trainer` (its subclasses inherit it)."""
    trainer_class = module.Trainer
    if _claim(trainer_class):
        trainer_class.train = _entry(trainer_class.train, "resume_from_checkpoint", plan, _add_hf_stop)


def _add_hf_stop(trainer: Any, stop_at: int) -> None:
    callback = callback_class("TransformersStopAtStep")
    if not any(isinstance(c, callback) for c in trainer.callback_handler.callbacks):
        trainer.add_callback(callback(stop_at))


class _TransformersStop:
    """Has the Trainer save `checkpoint-N` after step N the way it saves any other, then stop.

    The stop is asked for only once the save is done (on_save): the checkpoint's trainer_state.json
    records the Trainer's control flags, and must read as the uninterrupted run's checkpoint of step N.
    Were the Trainer to save step N anyway, it is that save the stop waits for.
    """

    def __init__(self, stop_at: int) -> None:
        self.stop_at = stop_at
        self.saving = False
        self.saved = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step == self.stop_at and not self.saved:
            self.saving = True
            # At the end of an epoch, save_strategy="epoch" saves this step itself once the epoch's end
            # is through, as in the uninterrupted run; anywhere else the Trainer is asked to save now.
            if not (args.save_strategy == "epoch" and float(state.epoch).is_integer()):
                control.should_save = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.saving:  # called right after the save, before the loop looks at should_training_stop
            self.saving, self.saved = False, True
            control.should_training_stop = True
            sys.stderr.write(
                f"reprobox: stopping after step {self.stop_at} (checkpoint-{self.stop_at} saved)\n"
            )
        return control

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # Stopped mid-epoch, the Trainer still ends the epoch: save_strategy="epoch" would save step N
        # over again, as its uninterrupted run never does.
        if self.saved:
            control.should_save = False
        return control


# -- Lightning ----------------------------------------------------------------------------------------


def patch_lightning(module: ModuleType, plan: Plan) -> None:
    """Patch `Trainer` of `lightning.pytorch` or `pytorch_lightning`, whichever `module` belongs to."""
    trainer_class = module.Trainer
    if not _claim(trainer_class):
        return
    name = _LIGHTNING_CALLBACKS.get(module.__name__.removesuffix(".trainer.trainer"), "LightningStopAtStep")

    def add_stop(trainer: Any, stop_at: int) -> None:
        callback = callback_class(name)
        if not any(isinstance(c, callback) for c in trainer.callbacks):
            trainer.callbacks.append(callback(stop_at))

    trainer_class.fit = _entry(trainer_class.fit, "ckpt_path", plan, add_stop)


class _LightningStop:
    """Has a checkpoint of step N under Lightning's default name, saving it unless a ModelCheckpoint does,
    and stops the fit there.

    It is saved right after the step, as ModelCheckpoint(every_n_train_steps) saves one, unless the step
    ends an epoch: then the epoch's own end comes first, as in the uninterrupted run (its validation, and
    the checkpoints ModelCheckpoint saves after validation or at the end of an epoch), and ours is saved
    at the end of training only if none of those was.
    """

    def __init__(self, stop_at: int) -> None:
        self.stop_at = stop_at
        self.path: str | None = None  # set once step N is done
        self.saved = False

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        # Run after every ModelCheckpoint (Lightning puts those last), to see whether one saved this step.
        # A new list: the one Lightning is iterating over is left as it is.
        trainer.callbacks = [c for c in trainer.callbacks if c is not self] + [self]

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        # Under gradient accumulation global_step stays N for several batches: act on the first only.
        if self.path is not None or trainer.global_step != self.stop_at:
            return
        self.path = lightning_checkpoint_path(trainer, _first_model_checkpoint(trainer))  # epoch E, now
        trainer.should_stop = True
        _allow_early_stop(trainer)
        if not _ends_epoch(trainer):
            self._save(trainer, self.path)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.path is not None and not self.saved:
            self._save(trainer, self.path)

    def _save(self, trainer: Any, path: str) -> None:
        self.saved = True
        model_checkpoint = _first_model_checkpoint(trainer)
        # A ModelCheckpoint that saved this step wrote this very file: saving again would only have it
        # write a "-v1" copy next time. file_exists agrees across ranks.
        if model_checkpoint is None or not model_checkpoint.file_exists(path, trainer):
            trainer.save_checkpoint(path, weights_only=False)  # as ModelCheckpoint saves by default
        sys.stderr.write(f"reprobox: stopping after step {self.stop_at} ({path} saved)\n")


def _ends_epoch(trainer: Any) -> bool:
    """Whether the batch just trained is the epoch's last (limit_train_batches included)."""
    progress = trainer.fit_loop.epoch_loop.batch_progress
    return bool(progress.is_last_batch) or progress.current.ready >= trainer.num_training_batches


def _first_model_checkpoint(trainer: Any) -> Any:
    """The first ModelCheckpoint (or subclass), not another Checkpoint such as OnExceptionCheckpoint."""
    return next((c for c in trainer.checkpoint_callbacks if hasattr(c, "file_exists")), None)


def lightning_checkpoint_path(trainer: Any, model_checkpoint: Any) -> str:
    """Where ModelCheckpoint's default name puts step N: `<its dirpath>/epoch=E-step=N.ckpt`."""
    dirpath = getattr(model_checkpoint, "dirpath", None)
    if not dirpath:
        dirpath = f"{str(trainer.default_root_dir).rstrip('/')}/checkpoints"
    # Joined as text: dirpath may be a URL (s3://...), which pathlib would mangle.
    return f"{str(dirpath).rstrip('/')}/epoch={trainer.current_epoch}-step={trainer.global_step}.ckpt"


def _allow_early_stop(trainer: Any) -> None:
    """Lightning ignores should_stop until min_epochs / min_steps are met: lift them, for this fit only.

    They bound only when a fit may end early; unlike max_steps/max_epochs they shape no LR schedule.
    """
    fit_loop = trainer.fit_loop
    if fit_loop.min_epochs:
        fit_loop.min_epochs = 0
    if fit_loop.epoch_loop.min_steps:
        fit_loop.epoch_loop.min_steps = None


# -- The callback classes ------------------------------------------------------------------------------

# Each is built on first use from our mixin and the framework's base class (never imported here before
# the job imports the framework), and published as a module attribute so pickle finds it by name: a
# Lightning Trainer is pickled to ddp_spawn processes, which rebuild the class through __getattr__.
_LIGHTNING_CALLBACKS = {"lightning.pytorch": "LightningStopAtStep", "pytorch_lightning": "PLStopAtStep"}
_CALLBACK_CLASSES: dict[str, tuple[type, str, str]] = {
    "TransformersStopAtStep": (_TransformersStop, "transformers.trainer_callback", "TrainerCallback"),
    "LightningStopAtStep": (_LightningStop, "lightning.pytorch.callbacks", "Callback"),
    "PLStopAtStep": (_LightningStop, "pytorch_lightning.callbacks", "Callback"),
}


def callback_class(name: str) -> type:
    """The callback class `name`, built the first time it is asked for."""
    built = globals().get(name)
    if isinstance(built, type):
        return built
    mixin, module_name, base_name = _CALLBACK_CLASSES[name]
    base = getattr(importlib.import_module(module_name), base_name)
    built = type(
        name, (mixin, base), {"__module__": __name__, "__qualname__": name, "__doc__": mixin.__doc__}
    )
    globals()[name] = built
    return built


def __getattr__(name: str) -> type:
    if name in _CALLBACK_CLASSES:
        return callback_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
