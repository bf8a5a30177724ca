"""Put folders where reprobox writes its own records: the guest's result and the manifest."""

import os
from pathlib import Path

run_dir = Path(os.environ["REPROBOX_RUN_DIR"])
(run_dir / ".reprobox" / "guest.json").mkdir(parents=True)
(run_dir / "manifest.json").mkdir()
print("planted", flush=True)
