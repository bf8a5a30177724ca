"""Record the paths a job sees (cwd, its files, HOME, TMPDIR, outputs, data) in a JSON file and a checkpoint.

HOME and TMPDIR must start empty in every run; a marker left in each shows the next run does not see it.
The values are read the way frameworks read them (os.getcwd, os.path, tempfile), not resolved.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import sys
import tempfile
from pathlib import Path

import helper

outputs = Path(os.environ["REPROBOX_OUTPUT_DIR"])
home, tmp = Path(os.environ["HOME"]), Path(os.environ["TMPDIR"])
seen = {
    "cwd": os.getcwd(),  # noqa: PTH109
    "file": str(Path(__file__).absolute()),
    "helper": helper.where(),
    "home": str(home),
    "home_entries": sorted(p.name for p in home.iterdir()),
    "home_expanded": str(Path("~").expanduser()),
    "tmpdir": str(tmp),
    "tmp_entries": sorted(p.name for p in tmp.iterdir() if not p.name.startswith("reprobox-boot-")),
    "gettempdir": tempfile.gettempdir(),
    "mkdtemp_parent": str(Path(tempfile.mkdtemp()).parent),
    "output_dir": str(outputs),
    "run_dir": os.environ["REPROBOX_RUN_DIR"],
    "code_dir": os.environ["REPROBOX_CODE_DIR"],
    "pwd": os.environ.get("PWD"),
    "data_dir": os.environ["DATA_DIR"],
    "data": Path(os.environ["DATA_DIR"], "scale.txt").read_text().strip(),
    "sys_path0": sys.path[0],
}
(home / "marker").write_text("left by a run\n")
(tmp / "marker").write_text("left by a run\n")
print(f"run {os.environ['REPROBOX_RUN_ID']} writes into {outputs}", flush=True)

draw = random.Random(0)
model = {"weight": [[draw.gauss(0, 1) for _ in range(4)] for _ in range(2)], "bias": [0.0, 0.0]}
state = {"model": model, "paths": seen, "work_dir": str(outputs)}
(outputs / "model.pkl").write_bytes(pickle.dumps(state, protocol=4))
(outputs / "paths.json").write_text(json.dumps(seen, indent=1, sort_keys=True) + "\n")
if os.environ.get("SAVES_PATHS_FAIL"):
    sys.exit(3)
