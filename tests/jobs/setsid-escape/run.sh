#!/usr/bin/env bash
# A child in a session of its own (outside the job's process group) and a slow foreground step:
# stopping the run must end both.
setsid sleep 300 &
echo "$!" > "$REPROBOX_OUTPUT_DIR/escaped.pid"
echo "$$" > "$REPROBOX_OUTPUT_DIR/shell.pid"
python -c "import time; time.sleep(300)"
