#!/usr/bin/env bash
# Renders a report page to a PNG in headless Chromium so a person can look at it.
#   scripts/screenshot_report.sh report.html [out.png] [width] [height]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/screenshot_report.sh report.html [out.png] [width] [height]" >&2; exit 2; }
HTML=$(realpath "$1")
PNG=$(realpath -m "${2:-${1%.html}.png}")
WIDTH=${3:-840}
HEIGHT=${4:-3000}
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "chromium is not installed (apt-get install -y chromium)" >&2; exit 1; }
PROFILE=$(mktemp -d)
trap 'rm -rf "$PROFILE"' EXIT
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$PROFILE" --window-size="$WIDTH,$HEIGHT" \
  --screenshot="$PNG" "file://$HTML" 2>/dev/null
echo "wrote $PNG"
