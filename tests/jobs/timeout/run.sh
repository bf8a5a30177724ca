#!/usr/bin/env bash
# A background child and a foreground sleep: both must be gone after the timeout.
sleep 300 &
echo "background pid $!" > "$REPROBOX_OUTPUT_DIR/background.pid"
python -c "import time; time.sleep(300)"
