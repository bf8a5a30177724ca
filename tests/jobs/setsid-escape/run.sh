#!/usr/bin/env bash
# A child in a session of its own (outside the job's process group), a double-forked daemon, and a slow
# foreground step: stopping the run must end them all.
setsid sleep 300 &
echo "$!" > "$REPROBOX_OUTPUT_DIR/escaped.pid"
# and one that double-forks away with a cleared environment: neither its group nor its variables name it
env -i setsid bash -c 'sleep 301 & echo "$!" > "$1"' daemon "$REPROBOX_OUTPUT_DIR/daemon.pid"
echo "$$" > "$REPROBOX_OUTPUT_DIR/shell.pid"
python -c "import time; time.sleep(300)"
