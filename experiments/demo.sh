#!/usr/bin/env bash
# The main job on its built-in default: the study suite, then the figures.
set -euo pipefail
build=${1:-build}
rpsim="$build/rpsim"

echo "== rpsim explain: how 0.1 rounds to binary16 and to OCP E4M3"
"$rpsim" explain 0.1 --format binary16
"$rpsim" explain 0.1 --format e4m3

if [ -d ../shared/testfloat ]; then
  echo "== TestFloat conformance (../shared/testfloat)"
  pass=0 fail=0
  for f in ../shared/testfloat/*.tv; do
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

if "$rpsim" study --help >/dev/null 2>&1; then
  echo "== Study suite (results/), then figures (results/figures/)"
  "$rpsim" study all --out results
  # Notebook 06 draws a sweep's summary: the small CI grid (fp16-amp/bf16-amp x
  # learning rate x seed, synthetic data, a few seconds).
  "$rpsim" sweep experiments/configs/sweep-ci.json --out results/sweep-ci
  if [ -x /usr/bin/jupyter-nbconvert ]; then
    bash notebooks/render.sh results
  else
    echo "jupyter-nbconvert not installed: figures not rendered" >&2
  fi
fi
