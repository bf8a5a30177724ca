#!/usr/bin/env bash
# The picture of a report in the docs (docs/images/report-threads.png): two real runs of
# examples/tiny-gpt on the local runtime, one on one thread and one on two, reported as HTML and
# photographed by headless chromium, then cropped to the page and reduced to a palette to stay small.
#
# Usage: scripts/report-screenshot.sh [PNG]   (default: docs/images/report-threads.png)
# Needs reprobox installed with its report extra (matplotlib, Pillow) and Debian's chromium
# (apt-get install chromium). Takes about a minute on two cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
png="${1:-docs/images/report-threads.png}"
python="${PYTHON:-python3}"
chromium="$(command -v chromium || command -v chromium-browser)" || {
    echo "report-screenshot: needs chromium (apt-get install chromium)" >&2
    exit 2
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for job in job.yaml job-2threads.yaml; do  # determinism: threads: 1, then 2
    "$python" -m reprobox run "examples/tiny-gpt/$job" --runtime local --trail 10 --runs-dir "$work/runs" -q
done
mapfile -t runs < <(find "$work/runs/tiny-gpt" "$work/runs/tiny-gpt-2threads" -mindepth 1 -maxdepth 1 \
    -type d -name '2*')  # the run folders, not the links beside them
"$python" -m reprobox report "${runs[@]}" --html "$work/report.html" -q

"$chromium" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile" --window-size=1200,6000 --screenshot="$work/page.png" \
    "file://$work/report.html" 2>/dev/null

"$python" - "$work/page.png" "$png" <<'EOF'
"""Crop the window to the page's content and store it with a 64-colour palette."""
import sys
from PIL import Image, ImageChops

page = Image.open(sys.argv[1]).convert("RGB")
blank = Image.new("RGB", page.size, page.getpixel((0, page.height - 1)))
left, top, right, bottom = ImageChops.difference(page, blank).getbbox()
page = page.crop((0, 0, page.width, min(page.height, bottom + 24)))
page.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(sys.argv[2], optimize=True)
print(f"{sys.argv[2]}: {page.width}x{page.height}")
EOF
