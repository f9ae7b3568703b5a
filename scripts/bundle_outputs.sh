#!/usr/bin/env bash
# Fits a device run's output dir into what the device tool brings back (at most 8 files): with
# more than 8 files directly in DIR, the JSON and markdown summaries stay as they are (up to 7,
# in name order) and every other file goes into DIR/rest.tgz. Fewer: nothing changes.
#   usage: scripts/bundle_outputs.sh DIR
set -euo pipefail
dir=${1:?usage: bundle_outputs.sh DIR}
count=$(find "$dir" -maxdepth 1 -type f | wc -l)
[ "$count" -le 8 ] && exit 0
cd "$dir"
keep=$(find . -maxdepth 1 -type f \( -name '*.json' -o -name '*.md' \) -printf '%f\n' | sort | head -7)
find . -maxdepth 1 -type f ! -name rest.tgz -printf '%f\n' | sort | { grep -vxF "$keep" || true; } \
  | tar -czf rest.tgz -T - --remove-files
echo "outputs: $(echo "$keep" | tr '\n' ' ')kept; the rest in rest.tgz"
