#!/usr/bin/env bash
# Executes the numbered notebooks headlessly on a results folder and fails if
# any notebook fails. Figures land in RESULTS_DIR/figures/.
#   notebooks/render.sh [RESULTS_DIR] [NN ...]     (default: ../results, all)
# Runs on Debian's Python (/usr/bin/python3: matplotlib, pandas, nbconvert).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
results=$(realpath -m "${1:-$here/../results}")
shift || true
nbconvert=${RPSIM_NBCONVERT:-/usr/bin/jupyter-nbconvert}
if [ ! -x "$nbconvert" ]; then
  echo "render.sh: $nbconvert not found (apt install jupyter-nbconvert python3-matplotlib python3-pandas)" >&2
  exit 3
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export RPSIM_RESULTS="$results" MPLBACKEND=Agg PYDEVD_DISABLE_FILE_VALIDATION=1
notebooks=()
if [ $# -eq 0 ]; then
  notebooks=("$here"/[0-9][0-9]-*.ipynb)
else
  for nn in "$@"; do notebooks+=("$here"/"$nn"-*.ipynb); done
fi
failed=0
for nb in "${notebooks[@]}"; do
  start=$(date +%s)
  if (cd "$here" && "$nbconvert" --to notebook --execute --ExecutePreprocessor.timeout=600 \
        --output-dir "$out" "$nb" >"$out/log.txt" 2>&1); then
    echo "ok    $(basename "$nb") ($(( $(date +%s) - start )) s)"
  else
    echo "FAIL  $(basename "$nb")"; tail -n 25 "$out/log.txt" >&2; failed=1
  fi
done
exit $failed
