"""Truth: each run writes one Hydra output folder, outputs/<date>/<time> (a reading of the clock, by
construction); in it model.pt (torch.load, weights_only=True) holds an equal state_dict, train.log the
same logger, level and message on every line (each line's stamp is a clock reading), and .hydra's
config.yaml, overrides.yaml and hydra.yaml (OmegaConf.load, unresolved) equal values, but for
hydra.yaml's runtime.output_dir (that folder) and the run's own folder in runtime.cwd and the config
search path (the truth's two runs run in two folders)."""

import re
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "_truth"))

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from runner import run_twice, verdict  # noqa: E402
from values import differences  # noqa: E402

LOG_LINE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[([^\]]+)\]\[(\w+)\] - (.*)")


def output_folder(run: Path) -> Path:
    (folder,) = (run / "outputs").glob("*/*")
    datetime.strptime(f"{folder.parent.name} {folder.name}", "%Y-%m-%d %H-%M-%S")  # a clock reading
    return folder


def log_lines(folder: Path) -> list[tuple[str, str, str]]:
    out = []
    for line in (folder / "train.log").read_text().splitlines():
        stamp, logger, level, message = LOG_LINE.fullmatch(line).groups()
        datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
        out.append((logger, level, message))
    return out


def without_run_paths(value, run: Path, folder: Path):
    if isinstance(value, dict):
        return {k: without_run_paths(v, run, folder) for k, v in value.items()}
    if isinstance(value, list):
        return [without_run_paths(v, run, folder) for v in value]
    if isinstance(value, str):
        return value.replace(str(folder), "<output folder>").replace(str(run), "<run folder>")
    return value


def hydra_files(run: Path, folder: Path) -> dict:
    files = {}
    for name in ("config.yaml", "overrides.yaml", "hydra.yaml"):
        loaded = OmegaConf.to_container(OmegaConf.load(folder / ".hydra" / name), resolve=False)
        files[name] = without_run_paths(loaded, run, folder)
    return files


a, b = run_twice(HERE, seed_torch=True)
folder_a, folder_b = output_folder(a), output_folder(b)
model_a = torch.load(folder_a / "model.pt", weights_only=True)
model_b = torch.load(folder_b / "model.pt", weights_only=True)
diffs = differences(sorted(model_a), sorted(model_b), "model.pt names")
diffs += [
    f"model.pt: {k} differs" for k in model_a if k in model_b and not torch.equal(model_a[k], model_b[k])
]
logs_a, logs_b = log_lines(folder_a), log_lines(folder_b)
diffs += differences(logs_a, logs_b, "train.log")
diffs += differences(hydra_files(a, folder_a), hydra_files(b, folder_b), ".hydra")
verdict(
    diffs,
    f"outputs/<date>/<time>/model.pt: equal state_dict ({len(model_a)} tensors); train.log: {len(logs_a)} "
    "equal messages (only their stamps differ); .hydra's three files equal but for the output folder "
    f"({folder_a.relative_to(a)} vs {folder_b.relative_to(b)}) and the run's own folder",
)
