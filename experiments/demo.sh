#!/usr/bin/env bash
# The main job on its built-in default: the study suite, then the figures.
#   experiments/demo.sh [BUILD] [--quick]          (make demo, make demo QUICK=1)
# --quick: the same steps at tiny sizes (each study's --quick configuration, one rounding mode of
# TestFloat's vectors, a few steps of the PyTorch examples); .ci/run runs it on a fresh clone.
set -euo pipefail
build=build quick=0
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    -*) echo "demo.sh: unknown option $arg (known: --quick)" >&2; exit 2 ;;
    *) build=$arg ;;
  esac
done
rpsim="$build/rpsim"
study_size=() example_size=() llama_size=() testfloat_files=(../shared/testfloat/*.tv)
if [ "$quick" = 1 ]; then
  echo "== quick demo: every step at its tiny size"
  study_size=(--quick) example_size=(--steps 6 --batch 4 --seq 16) llama_size=(--quick)
  testfloat_files=(../shared/testfloat/*.rne.tv)
fi
start_all=$(date +%s)
# The notebooks that compute live (01) import the module rpsim from this build (render.sh).
export RPSIM_PYTHONPATH="${RPSIM_PYTHONPATH:-$build/python}"

echo "== rpsim explain: how 0.1 rounds to binary16 and to OCP E4M3"
"$rpsim" explain 0.1 --format binary16
"$rpsim" explain 0.1 --format e4m3

if [ -d ../shared/testfloat ]; then
  echo "== TestFloat conformance (../shared/testfloat, ${#testfloat_files[@]} files)"
  pass=0 fail=0
  for f in "${testfloat_files[@]}"; do
    name=${f##*/}; op=${name%%.*}; r=${name#*.}; r=${r%.tv}
    last=$("$rpsim" testfloat "$op" --rounding "$r" "$f" | tail -n 1)
    pass=$((pass + ${last%% passed*})); rest=${last#*, }; fail=$((fail + ${rest%% failed*}))
  done
  echo "testfloat: $pass passed, $fail failed"
fi

if [ -d ../shared/tc-golden ] && "$rpsim" tc-validate --help >/dev/null 2>&1; then
  echo "== Tensor-core models against real-GPU data (../shared/tc-golden)"
  for g in ../shared/tc-golden/*/; do "$rpsim" tc-validate "$g" | tail -n 1 | sed "s#^#${g%/}: #"; done
fi

render=1
if [ ! -x /usr/bin/jupyter-nbconvert ]; then
  echo "jupyter-nbconvert not installed: figures not rendered" >&2
  render=0
fi
# The notebooks render in the background while the next study or example trains (two cores:
# one each); a failed rendering fails the demo at the end, once every step is done.
renders=()
trap 'if [ ${#renders[@]} -gt 0 ]; then wait; fi' EXIT  # a failed step leaves no rendering behind
render_bg() {
  bash notebooks/render.sh results "$@" &
  renders+=($!)
}
wait_renders() {
  local failed=0 pid
  for pid in "${renders[@]}"; do wait "$pid" || failed=1; done
  renders=()
  if [ "$failed" = 1 ]; then echo "demo.sh: a notebook failed to render (FAIL above)" >&2; exit 1; fi
}

if "$rpsim" study --help >/dev/null 2>&1; then
  echo "== Study suite (results/), each study's figures (results/figures/) as soon as it is done"
  # `rpsim study all` one study at a time (its table's order), each followed
  # by the notebook named after it (NN-<study>.ipynb), so the first figure is
  # there in well under a minute instead of after the whole suite.
  start=$(date +%s)
  for study in $("$rpsim" study list | cut -d' ' -f1); do
    "$rpsim" study "$study" ${study_size[@]+"${study_size[@]}"} --out "results/$study"
    for nb in notebooks/[0-9][0-9]-"$study".ipynb; do
      [ "$render" = 1 ] && [ -e "$nb" ] || continue
      nn=$(basename "$nb"); render_bg "${nn%%-*}"
    done
  done
  echo "all studies: $(( $(date +%s) - start )) s (figures as they render)"
  # Notebook 06 draws a sweep's summary: the small CI grid (fp16-amp/bf16-amp x
  # learning rate x seed, synthetic data, a few seconds).
  "$rpsim" sweep experiments/configs/sweep-ci.json --out results/sweep-ci
  if [ "$render" = 1 ]; then render_bg 06; fi
fi

# Notebook 09 draws one PyTorch model through rpsim.torch (the LLaMA-style example under
# fp16-amp with DeepSpeed's loss scaler and an FP64 shadow, 60 steps): needs Debian's
# python3-torch and the module built into $build/python.
echo "== Your model through rpsim.torch (results/your-model, notebook 09)"
torch_skip=""
if ! /usr/bin/python3 -c "import torch" >/dev/null 2>&1; then
  torch_skip="python3-torch is not installed (apt-get install python3-torch)"
elif [ ! -d "$build/python/rpsim" ]; then
  torch_skip="the Python module rpsim is not built ($build/python/rpsim missing)"
fi
if [ -n "$torch_skip" ]; then
  echo "SKIPPED: $torch_skip: no results/your-model, no notebook 09"
else
  PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 experiments/python/examples/your_model_run.py \
    --out results/your-model ${example_size[@]+"${example_size[@]}"}
  if [ "$render" = 1 ]; then
    render_bg 09
    # The same run drawn by the study notebooks (RPSIM_RUN: notebooks/user_runs.py),
    # written beside the studies' own figures as NN-name-run.*
    RPSIM_RUN=results/your-model render_bg 03 05 07
  else
    echo "SKIPPED: notebook 09 not rendered (jupyter-nbconvert not installed)"
  fi
fi

# Notebook 11 draws the LLaMA-style decoder (a model rpsim train cannot build) under bf16, fp8,
# mxfp8, nvfp4 and mxfp4, each beside its FP64 shadow, 40 steps each through rpsim.torch.
echo "== The LLaMA-style study through rpsim.torch (results/llama-block-scaled, notebook 11)"
if [ -n "$torch_skip" ]; then
  echo "SKIPPED: $torch_skip: no results/llama-block-scaled, no notebook 11"
else
  PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 experiments/python/examples/llama_study.py \
    --out results/llama-block-scaled ${llama_size[@]+"${llama_size[@]}"}
  if [ "$render" = 1 ]; then
    render_bg 11
  else
    echo "SKIPPED: notebook 11 not rendered (jupyter-nbconvert not installed)"
  fi
fi
wait_renders
echo "== demo$([ "$quick" = 1 ] && echo " (quick)") done in $(( $(date +%s) - start_all )) s: figures in results/figures/"
