"""Save a few draws of Python's generator, which reprobox seeds from the job's seed."""

import json
import os
import random
from pathlib import Path

draws = [random.random() for _ in range(4)]
(Path(os.environ["REPROBOX_OUTPUT_DIR"]) / "draws.json").write_text(json.dumps(draws) + "\n")
