#!/usr/bin/env bash
# Executes the numbered notebooks headlessly on a results folder and fails if
# any notebook fails. With RPSIM_RUN set (a user's run folders, ':'-separated),
# 03, 05 and 07 draw those runs instead of the studies, kept as NN-name-run.*;
# 09 draws the one run folder RPSIM_RUN names. Figures land in RESULTS_DIR/figures/, and each executed
# notebook beside them as RESULTS_DIR/figures/NN-name.html (its tables, such as
# "measured next to published", and figures), moved there once complete.
#   notebooks/render.sh [RESULTS_DIR] [NN ...]     (default: ../results, all)
# Runs on Debian's Python (/usr/bin/python3: matplotlib, pandas, nbconvert);
# 01 also imports the module rpsim (build/python, or RPSIM_PYTHONPATH).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
results=$(realpath -m "${1:-$here/../results}")
shift || true
nbconvert=${RPSIM_NBCONVERT:-/usr/bin/jupyter-nbconvert}
if [ ! -x "$nbconvert" ]; then
  echo "render.sh: $nbconvert not found (apt install jupyter-nbconvert python3-matplotlib python3-pandas)" >&2
  exit 3
fi
mkdir -p "$results/figures"
out=$(mktemp -d "$results/figures/.render.XXXXXX")
trap 'rm -rf "$out"' EXIT
export RPSIM_RESULTS="$results" MPLBACKEND=Agg PYDEVD_DISABLE_FILE_VALIDATION=1
# The notebooks run in notebooks/: each folder of RPSIM_RUN is made absolute here, from the folder
# render.sh was called in, as RESULTS_DIR is (`RPSIM_RUN=results/your-model notebooks/render.sh
# results 03` from the repository root read notebooks/results/your-model: issue #36).
if [ -n "${RPSIM_RUN:-}" ]; then
  runs=""
  IFS=: read -r -a run_folders <<<"$RPSIM_RUN"
  for f in "${run_folders[@]}"; do
    [ -n "${f// /}" ] || continue
    runs="${runs:+$runs:}$(realpath -m "${f/#\~/$HOME}")"
  done
  if [ -n "$runs" ]; then export RPSIM_RUN="$runs"; fi  # else user_runs.py says it is empty
fi
# Notebooks that compute live import the module rpsim from the build tree
# (or from where `cmake --install` put it, already on the path).
python_dir=$(realpath -m "${RPSIM_PYTHONPATH:-$here/../build/python}")  # from the caller's folder too
if [ -d "$python_dir/rpsim" ]; then export PYTHONPATH="$python_dir${PYTHONPATH:+:$PYTHONPATH}"; fi
notebooks=()
if [ $# -eq 0 ]; then
  notebooks=("$here"/[0-9][0-9]-*.ipynb)
else
  for nn in "$@"; do notebooks+=("$here"/"$nn"-*.ipynb); done
fi
failed=0
for nb in "${notebooks[@]}"; do
  start=$(date +%s)
  name=$(basename "$nb" .ipynb)
  # 03, 05 and 07 on a user's run folders (RPSIM_RUN) are kept beside the study's, as their figures are.
  kept=$name
  if [ -n "${RPSIM_RUN:-}" ] && [[ $name =~ ^0[357]- ]]; then kept=$name-run; fi
  if (cd "$here" && "$nbconvert" --to html --execute --ExecutePreprocessor.timeout=600 \
        --output-dir "$out" "$nb" >"$out/log.txt" 2>&1); then
    mv -f "$out/$name.html" "$results/figures/$kept.html"
    echo "ok    $name ($(( $(date +%s) - start )) s): $results/figures/$kept.html"
  else
    echo "FAIL  $(basename "$nb")"; tail -n 25 "$out/log.txt" >&2; failed=1
  fi
done
exit $failed
