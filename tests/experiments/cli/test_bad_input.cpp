// Bad input through the real command line: every case must exit with status 2,
// print a message that names the offending input (file, field or value), finish within a time limit
// (no hang), and leave no file behind (no partial result, no temporary).
//
// Each case runs in a fresh empty working folder holding only `a-file` (a
// regular file) and `a-dir/` (an empty folder), so that default output paths
// (results/...) land there and any new file is seen. Static inputs are in
// tests/data/bad_input/. Placeholders in the arguments: {data} = that folder,
// {tmp} = the working folder, {source} = the source tree.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "run_cli.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;

namespace {

struct BadInput {
  const char* command;  // the subcommand, which must exist in this build
  const char* args;     // after `rpsim`, with {data} and {tmp}
  const char* names;    // text the message must contain (the file, field or value)
};

// clang-format off
const BadInput kCases[] = {
    // --- formats: names of formats and rounding modes, custom specs
    {"explain", "explain 1.5 -f e4m3x", "e4m3x"},
    {"explain", "explain 1.5 -f binary16 -r rnz", "rnz"},
    {"explain", "explain 1.5abc -f binary16", "1.5abc"},
    {"explain", "explain 1 -f e0m3", "e0m3"},                              // 0 exponent bits
    {"explain", "explain 1 -f exp=0,man=3", "exp=0,man=3"},
    {"explain", "explain 1 -f exp=11,man=60", "exp=11,man=60"},           // more than 64 bits
    {"explain", "explain 1 -f e12m52", "e12m52"},                          // 65 bits
    {"explain", "explain 1 -f e5m0", "e5m0"},                              // IEEE format without NaN room
    {"explain", "explain 1 -f exp=5,man=2,colour=red", "colour"},
    {"explain", "explain 1 -f exp=5,man=2,bias=x", "bias"},
    {"explain", "explain 1 -f exp=5,man=2,overflow=wrap", "wrap"},
    {"explain", "explain 1 -f exp=4,man=3,sign=no,nonfinite=fnuz", "exp=4,man=3,sign=no,nonfinite=fnuz"},
    {"explain", "explain 1 -f ''", "format"},
    // --- TestFloat vector files
    {"testfloat", "testfloat f16_frobnicate {data}/tf_f16_add_bad_hex.tv", "frobnicate"},
    {"testfloat", "testfloat f99_add {data}/tf_f16_add_bad_hex.tv", "f99"},
    {"testfloat", "testfloat f16_add {tmp}/missing.tv", "missing.tv"},
    {"testfloat", "testfloat f16_add {tmp}/a-dir", "a-dir"},               // unreadable: a folder
    {"testfloat", "testfloat f16_add {data}/tf_f16_add_too_few_fields.tv", "tf_f16_add_too_few_fields.tv:2"},
    {"testfloat", "testfloat f16_add {data}/tf_f16_add_too_many_fields.tv", "tf_f16_add_too_many_fields.tv:1"},
    {"testfloat", "testfloat f16_add {data}/tf_f16_add_bad_hex.tv", "BAZ0"},
    {"testfloat", "testfloat f16_add {data}/tf_f16_add_operand_too_wide.tv", "13447"},
    {"testfloat", "testfloat f16_add {data}/tf_f16_add_bad_flags.tv", "FF"},
    {"testfloat", "testfloat f16_add {data}/tf_f16_add_truncated.tv", "tf_f16_add_truncated.tv:2"},
    {"testfloat", "testfloat f32_mulAdd {data}/tf_f16_add_bad_hex.tv", "tf_f16_add_bad_hex.tv:1"},  // wrong operation
    {"testfloat", "testfloat f16_add -r sr {data}/tf_f16_add_bad_hex.tv", "sr"},
    {"testfloat", "testfloat f16_add -r banker {data}/tf_f16_add_bad_hex.tv", "banker"},
    // --- loss scaler: policies, out-of-range values, NaN/inf, event files, output
    {"scaler", "scaler --policy nope --events {data}/events_nan.txt", "nope"},
    {"scaler", "scaler --policy pytorch --init-scale -1 --events {data}/events_bad_token.txt", "init"},
    {"scaler", "scaler --policy pytorch --init-scale 0 --events {data}/events_bad_token.txt", "init"},
    {"scaler", "scaler --policy pytorch --init-scale nan --events {data}/events_bad_token.txt", "init"},
    {"scaler", "scaler --policy pytorch --init-scale inf --events {data}/events_bad_token.txt", "init"},
    {"scaler", "scaler --policy pytorch --growth-interval 0 --events {data}/events_bad_token.txt", "growth"},
    {"scaler", "scaler --policy pytorch --growth-interval -5 --events {data}/events_bad_token.txt", "growth"},
    {"scaler", "scaler --policy pytorch --growth-factor 0.5 --events {data}/events_bad_token.txt", "growth"},
    {"scaler", "scaler --policy pytorch --backoff-factor 2 --events {data}/events_bad_token.txt", "backoff"},
    {"scaler", "scaler --policy pytorch --backoff-factor nan --events {data}/events_bad_token.txt", "backoff"},
    {"scaler", "scaler --policy deepspeed --min-scale -1 --events {data}/events_bad_token.txt", "min"},
    {"scaler", "scaler --policy apex --min-scale 8 --max-scale 2 --events {data}/events_bad_token.txt", "scale"},
    {"scaler", "scaler --policy pytorch --growth-interval abc --events {data}/events_bad_token.txt", "abc"},
    {"scaler", "scaler --policy pytorch --events {tmp}/missing.events", "missing.events"},
    {"scaler", "scaler --policy pytorch --events {tmp}/a-dir", "a-dir"},
    {"scaler", "scaler --policy pytorch --events {data}/events_bad_token.txt", "events_bad_token.txt:4"},
    {"scaler", "scaler --policy pytorch --events {data}/events_nan.txt", "events_nan.txt:2"},
    {"scaler", "scaler --policy pytorch --events {data}/events_inf.txt", "events_inf.txt:2"},
    {"scaler", "scaler --policy pytorch --events {data}/events_nul.txt", "events_nul.txt:2"},
    {"scaler", "scaler --policy pytorch --events {data}/events_bad_token.txt -o {tmp}/out.csv", "events_bad_token.txt"},
    {"scaler", "scaler --policy pytorch --events {data}/events_empty.txt", "events_empty.txt"},  // no events: not an empty table
    // (events valid, output not writable)
    {"scaler", "scaler --policy pytorch --events {data}/events_valid.txt -o {tmp}/a-file/out.csv", "a-file"},
    {"scaler", "scaler --policy pytorch --events {data}/events_valid.txt -o {tmp}/a-dir", "a-dir"},
    // --- tensor-core golden folders
    {"tc-validate", "tc-validate {tmp}/missing-gpu", "missing-gpu"},
    {"tc-validate", "tc-validate {tmp}/a-file", "a-file"},
    {"tc-validate", "tc-validate {tmp}/a-dir", "a-dir"},                     // no input-format folders
    {"tc-validate", "tc-validate {data}/tc_valid", "not a GPU folder"},     // a folder above a GPU folder
    {"tc-validate", "tc-validate {data}/tc_wrong_k/H100", "K"},              // K = 3 where H100 fp16 has 16
    {"tc-validate", "tc-validate {data}/tc_ragged/H100", "a_H100_fp16.txt:2"},
    {"tc-validate", "tc-validate {data}/tc_bad_hex/H100", "ZZZZ0000"},
    {"tc-validate", "tc-validate {data}/tc_bad_c/H100", "c_H100_fp32.txt:1"},
    {"tc-validate", "tc-validate {data}/tc_line_count/H100", "d_H100_fp32.txt"},
    {"tc-validate", "tc-validate {data}/tc_missing_d/H100", "d_H100"},
    {"tc-validate", "tc-validate {data}/tc_not_representable/H100", "3F800001"},
    {"tc-validate", "tc-validate {data}/tc_unknown_format/H100", "fp12"},
    {"tc-validate", "tc-validate --model nope {data}/tc_valid/H100", "nope"},
    // --- study configs (malformed, unknown keys, wrong types, out of range)
    {"study", "study nope --quick --out {tmp}/out", "nope"},
    {"study", "study summation --quick --config {tmp}/missing.json --out {tmp}/out", "missing.json"},
    {"study", "study summation --quick --config {tmp}/a-dir --out {tmp}/out", "a-dir"},
    {"study", "study summation --quick --config {data}/config_truncated.json --out {tmp}/out", "config_truncated.json"},
    {"study", "study summation --quick --config {data}/config_empty.json --out {tmp}/out", "config_empty.json"},
    {"study", "study summation --quick --config {data}/config_not_object.json --out {tmp}/out", "config_not_object.json"},
    {"study", "study summation --quick --config {data}/config_unknown_key.json --out {tmp}/out", "colour"},
    {"study", "study summation --quick --config {data}/config_extends_missing.json --out {tmp}/out", "no-such-base.json"},
    {"study", "study summation --quick --config {data}/config_extends_number.json --out {tmp}/out", "extends"},
    {"study", "study summation --quick --config {data}/config_extends_unknown_key.json --out {tmp}/out", "colour"},
    {"study", "study summation --quick --config {data}/config_wrong_type.json --out {tmp}/out", "seed"},
    {"study", "study summation --quick --config {data}/config_negative_trials.json --out {tmp}/out", "sr_trials"},
    {"study", "study summation --quick --config {data}/config_zero_terms.json --out {tmp}/out", "stagnation_max_terms"},
    {"study", "study summation --quick --config {data}/config_unknown_format.json --out {tmp}/out", "binary17"},
    {"study", "study summation --quick --config {data}/config_unknown_model.json --out {tmp}/out", "fp17"},
    {"study", "study summation --quick --config {data}/config_nmin_gt_nmax.json --out {tmp}/out", "error_n"},
    {"study", "study summation --quick --config {data}/config_string_scale.json --out {tmp}/out", "data_scale"},
    {"study", "study summation --quick --config {data}/config_infinite_scale.json --out {tmp}/out", "1e999"},  // the JSON reader rejects the number before any field is read
    {"study", "study summation --quick --out {tmp}/a-file/out", "a-file"},
    {"study", "study summation --quick --config {data}/config_block_size_zero.json --out {tmp}/out", "blocked:0"},
    // --- gemm: sizes, names, matrix files (NaN and infinity included)
    {"gemm", "gemm --m 0", "--m"},
    {"gemm", "gemm --k -3", "-3"},
    {"gemm", "gemm --input fp17", "fp17"},
    {"gemm", "gemm --model nope", "nope"},
    {"gemm", "gemm --model blocked:0:fp16", "blocked:0"},  // block size 0
    {"gemm", "gemm --dist cauchy", "cauchy"},
    {"gemm", "gemm --a {tmp}/missing.txt --b {data}/matrix_2x2.txt", "missing.txt"},
    {"gemm", "gemm --a {data}/matrix_nan.txt --b {data}/matrix_2x2.txt", "matrix_nan.txt"},
    {"gemm", "gemm --a {data}/matrix_2x2.txt --b {data}/matrix_inf.txt", "matrix_inf.txt"},
    {"gemm", "gemm --a {data}/matrix_ragged.txt --b {data}/matrix_2x2.txt", "matrix_ragged.txt:2"},
    {"gemm", "gemm --a {data}/matrix_bad_number.txt --b {data}/matrix_2x2.txt", "matrix_bad_number.txt:1"},
    {"gemm", "gemm --a {data}/matrix_empty.txt --b {data}/matrix_2x2.txt", "matrix_empty.txt"},
    {"gemm", "gemm --a {data}/matrix_2x3.txt --b {data}/matrix_2x2.txt", "2x3"},
    // --- block-scaled gemm: a scale format or block the instruction does not take, K not a multiple
    {"gemm", "gemm --model tc:b200:e4m3:fp32:tcgen05.mma:scale=ue4m3 --k 64", "ue4m3"},
    {"gemm", "gemm --model tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0:scale_block=16 --k 64", "scale_block 16"},
    {"gemm", "gemm --model tc:b200:e2m1:fp32:tcgen05.mma:scale=ue5m3 --k 64", "ue5m3"},
    {"gemm", "gemm --model tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0 --k 48", "--k 48"},
    // --- gemm --dump and gemm-check: array files, shapes, values, models
    {"gemm", "gemm --m 4 --n 4 --k 16 --dump {tmp}/a-file/x.npz", "a-file"},
    {"gemm", "gemm --m 4 --n 4 --k 16 --dump {tmp}/x.txt", "x.txt"},
    {"gemm-check", "gemm-check {tmp}/missing.npz --model cublas:h100:fp16:fp32", "missing.npz"},
    {"gemm-check", "gemm-check {tmp}/a-dir --model cublas:h100:fp16:fp32", "a-dir"},
    {"gemm-check", "gemm-check {data}/npz_not_zip.npz --model cublas:h100:fp16:fp32", "npz_not_zip.npz"},
    {"gemm-check", "gemm-check {data}/npz_truncated.npz --model cublas:h100:fp16:fp32", "npz_truncated.npz"},
    {"gemm-check", "gemm-check {data}/npy_truncated.npy --model cublas:h100:fp16:fp32", "npy_truncated.npy"},
    {"gemm-check", "gemm-check {data}/gemm_int_dtype.npy --model cublas:h100:fp16:fp32", "'<i4'"},
    {"gemm-check", "gemm-check {data}/gemm_wrong_shape.npz --model cublas:h100:fp16:fp32", "gemm_wrong_shape.npz: B"},
    {"gemm-check", "gemm-check {data}/gemm_no_d.npz --model cublas:h100:fp16:fp32", "gemm_no_d.npz: no array D"},
    {"gemm-check", "gemm-check {data}/gemm_inf_input.npz --model cublas:h100:fp16:fp32", "gemm_inf_input.npz: A[1, 1]"},
    {"gemm-check", "gemm-check {data}/gemm_d_third.npz --model cublas:h100:fp16:fp16", "gemm_d_third.npz: D[0, 0]"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz --model cublas:h100:fp17:fp32", "fp17"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz --model kernel:h100:fp16:fp32:split_k=0", "split_k"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz --model cublas:h100:fp16:fp32:fast_accum=1", "fast_accum=1"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz --model cublas:h100:fp16:fp32:input_b=e5m2", "e5m2"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz --model cublas:h100:e4m3:fp32:fast_accum=2", "fast_accum=2"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz", "--model"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz --model cublas:h100:fp16:fp32 --infer", "--infer"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz --model cublas:h100:fp16:fp32 --format csv", "csv"},
    {"gemm-check", "gemm-check {data}/matrix_2x2.txt --format text --model tc:h100:fp16:fp32", "no array A"},
    {"gemm-check", "gemm-check {data}/matrix_bad_number.txt --format text --model tc:h100:fp16:fp32", "matrix_bad_number.txt:1"},
    {"gemm", "gemm --threads -3", "--threads -3"},
    {"gemm", "gemm --a {data}/matrix_2x2.txt", "--b"},                      // was: a random B
    {"gemm", "gemm --b {data}/matrix_2x2.txt", "--a"},
    {"gemm", "gemm --a {data}/matrix_2x2.txt --b {data}/matrix_2x2.txt --m 4", "--m"},  // was: ignored
    {"gemm", "gemm --k 100000000", "--k 100000000"},                        // was: std::bad_alloc, exit 3
    // --- train: configs as in experiments/configs, broken one way each
    {"train", "train {tmp}/missing.json --out {tmp}/out", "missing.json"},
    {"train", "train {tmp}/a-dir --out {tmp}/out", "a-dir"},
    {"train", "train {data}/train_truncated.json --out {tmp}/out", "train_truncated.json"},
    {"train", "train {data}/train_not_object.json --out {tmp}/out", "train_not_object.json"},
    {"train", "train {data}/train_unknown_key.json --out {tmp}/out", "colour"},
    {"train", "train {data}/train_extends_missing.json --out {tmp}/out", "train_extends_missing.json: extends: "},
    {"train", "train {data}/train_extends_list.json --out {tmp}/out", "extends: expected a config file name"},
    {"train", "train {data}/train_wrong_type.json --out {tmp}/out", "batch_size"},
    {"train", "train {data}/train_zero_batch.json --out {tmp}/out", "batch_size"},
    {"train", "train {data}/train_unknown_policy.json --out {tmp}/out", "fp17-amp"},
    {"train", "train {data}/train_negative_scale.json --out {tmp}/out", "init_scale"},
    {"train", "train {data}/train_zero_growth_interval.json --out {tmp}/out", "growth_interval"},
    {"train", "train {data}/train_unknown_scaler.json --out {tmp}/out", "nope"},
    {"train", "train {data}/train_negative_lr.json --out {tmp}/out", "lr"},
    {"train", "train {data}/train_infinite_lr.json --out {tmp}/out", "lr"},
    {"train", "train {data}/train_unknown_optimizer.json --out {tmp}/out", "adamx"},
    {"train", "train {data}/train_model_wrong_type.json --out {tmp}/out", "model"},
    {"train", "train {data}/train_hidden_zero.json --out {tmp}/out", "hidden"},
    // was: a WARNING, then synthetic data
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set data.path={tmp}/no-such-folder --out {tmp}/out", "no-such-folder"},
    {"train", "train {source}/experiments/configs/mlp-fp16-amp.json --set optimizer.lr=nan --out {tmp}/out", "lr"},
    {"train", "train {source}/experiments/configs/mlp-fp16-amp.json --set nonsense --out {tmp}/out", "nonsense"},
    // An override that is not UTF-8 (found by fuzz_train_config: it was an internal error, exit 3).
    {"train", "train {source}/experiments/configs/mlp-fp16-amp.json --set \"$(printf 'optimizer.lr=0.1\\377')\" --out {tmp}/out", "not valid UTF-8"},
    {"train", "train {source}/experiments/configs/mlp-fp16-amp.json --out {tmp}/a-file/out", "a-file"},
    // --- issue 26: resource limits (were SIGSEGV, a hang, std::bad_alloc, or minutes of work)
    {"train", "train {source}/experiments/configs/mlp-fp32.json --threads 100000 --out {tmp}/out", "--threads 100000"},
    {"train", "train {source}/experiments/configs/mlp-fp32.json --threads 20000 --out {tmp}/out", "--threads 20000"},
    {"gemm", "gemm --m 8 --n 8 --k 8 --threads 100000", "--threads 100000"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz --model cublas:h100:fp16:fp32 --threads 100000", "--threads 100000"},
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set 'model.hidden=[100000,100000]' --out {tmp}/out", "the run needs about"},
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set 'model.hidden=[100000,100000]' --plan", "the run needs about"},
    {"train", "train {source}/experiments/configs/gpt-fp32.json --set model.block_size=100000 --out {tmp}/out", "the run needs about"},
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set batch_size=100000 --out {tmp}/out", "batch_size: 100000"},
    {"grads", "grads {data}/gemm_ok.npz --out {tmp}/a-file", "a-file"},
    // brief K: a mistyped command said only "A subcommand is required"; `help nope` was the help, status 0
    {"train", "trian {source}/experiments/configs/mlp-fp32.json", "unknown command 'trian' (did you mean train"},
    {"train", "help nope", "unknown command 'nope'"},
    // brief K: --jobs 100000 started a thread per run of the grid; -2 meant one per core
    {"sweep", "sweep {source}/experiments/configs/sweep-ci.json --jobs 100000 --out {tmp}/out", "--jobs 100000"},
    {"sweep", "sweep {source}/experiments/configs/sweep-ci.json --jobs -2 --out {tmp}/out", "--jobs -2"},
    // brief K: a run whose files cannot fit on the disk (here 10^12 steps, 300 TB of steps.csv) is
    // refused before its steps are computed; on a full disk they were computed, then lost
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set steps=1000000000000 --out {tmp}/out", "the run writes about"},
    // brief K: 10^12 cases were allocated on the GPU machine (exit 77 without a device, before the check)
    {"gpu-validate", "gpu-validate --cases 1000000000000 --out {tmp}/out", "--cases 1000000000000"},
    {"grads", "grads {data}/gemm_ok.npz --out ''", "--out"},
    // --- issue 26: output names and negative counts
    {"train", "train {source}/experiments/configs/mlp-fp32.json --out ''", "--out"},
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set name=../../x", "../../x"},
    {"gemm-check", "gemm-check {data}/gemm_ok.npz --model cublas:h100:fp16:fp32 --show -1", "--show"},
    {"explain", "explain 1 -f binary16 -r sr --seed -1", "--seed"},
    // --- issue 26: a file for another operation; non-finite inputs under every model, not only presets
    {"testfloat", "testfloat f32_add {data}/tf_f16_add_valid.tv", "tf_f16_add_valid.tv:1: operand"},  // was: exit 1, every line a failure
    {"gemm-check", "gemm-check {data}/gemm_inf_input.npz --model exact:binary32", "gemm_inf_input.npz: A[1, 1]"},
    {"gemm-check", "gemm-check {data}/gemm_inf_input.npz --model tc:h100:fp16:fp32", "gemm_inf_input.npz: A[1, 1]"},
    {"gemm-check", "gemm-check {data}/gemm_inf_input.npz --infer", "gemm_inf_input.npz: A[1, 1]"},
    {"sweep", "sweep {data}/sweep_empty_grid.json --out {tmp}/out", "grid is empty"},  // was: "expected an object"
    // --- issue 26: framework configs that would change the experiment silently
    {"train", "train {data}/deepspeed_scheduler.json --out {tmp}/out", "scheduler: DeepSpeed's WarmupCosineLR"},  // was: ignored
    {"train", "train {data}/deepspeed_hf_auto.json --out {tmp}/out",  // every "auto" at once, not one per run
     "fp16.enabled, optimizer.params.lr, optimizer.params.weight_decay, train_batch_size, train_micro_batch_size_per_gpu"},
    // --- issue 26: gradient accumulation, simulated (was folded into one batch)
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set gradient_accumulation_steps=0 --out {tmp}/out", "gradient_accumulation_steps: must be at least 1"},
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set gradient_accumulation_steps=3 --out {tmp}/out", "gradient_accumulation_steps: batch_size 128 is not a multiple"},
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set grad_accum_format=binary17 --out {tmp}/out", "grad_accum_format: unknown format"},
    {"train", "train {source}/experiments/configs/deepspeed-bf16.json --set gradient_accumulation_steps=3 --out {tmp}/out", "train_batch_size: 128 is not train_micro_batch_size_per_gpu 32 x gradient_accumulation_steps 3"},
    {"train", "train {source}/experiments/configs/deepspeed-bf16.json --set data_types.grad_accum_dtype=fp8 --out {tmp}/out", "data_types.grad_accum_dtype: \"fp8\""},
    // --- issue 26: a layers model sized from its specs (was built, then std::bad_alloc)
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set 'model={\"type\":\"layers\",\"layers\":[{\"op\":\"linear\",\"out\":100000},{\"op\":\"relu\"},{\"op\":\"linear\",\"out\":100000},{\"op\":\"linear\",\"out\":10}]}' --out {tmp}/out", "the run needs about"},
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set 'model={\"type\":\"layers\",\"layers\":[{\"op\":\"linear\",\"out\":100000},{\"op\":\"relu\"},{\"op\":\"linear\",\"out\":100000},{\"op\":\"linear\",\"out\":10}]}' --plan", "the run needs about"},
    // --- issue 36: duplicate JSON keys (a reader keeps the last without a word), in every JSON read
    {"train", "train {data}/train_duplicate_key.json --out {tmp}/out", "train_duplicate_key.json: \"policy\" is given twice"},
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set 'optimizer={\"type\":\"sgd\",\"lr\":1,\"lr\":2}' --out {tmp}/out", "--set optimizer: \"lr\" is given twice"},
    {"study", "study summation --quick --config {data}/train_duplicate_key.json --out {tmp}/out", "train_duplicate_key.json: \"policy\" is given twice"},
    {"sweep", "sweep {data}/sweep_duplicate_key.json --out {tmp}/out", "sweep_duplicate_key.json': \"grid.seed\" is given twice"},
    {"tc-validate", "tc-validate {data}/tc_duplicate_key/H100", "conventions.json: \"sets.fp16/fp32.c\" is given twice"},
    {"gemm-check", "gemm-check {data}/manifest_duplicate_key", "manifest.json: \"model\" is given twice"},
    // --- issue 36: messages that named the wrong cause or no option
    {"train", "train {source}/experiments/configs/mlp-fp32.json --set steps=2 --out /proc/rpsim-no-such/out", "cannot create the output folder '/proc/rpsim-no-such/out' (No such file or directory)"},
    {"grads", "grads {data}/gemm_ok.npz --min-log2-scale -100000 --out {tmp}/out", "--min-log2-scale -100000"},
    {"grads", "grads {data}/gemm_ok.npz --min-log2-scale 9 --max-log2-scale 8 --out {tmp}/out", "--min-log2-scale 9 is above --max-log2-scale 8"},
    {"tc-validate", "tc-validate {data}/tc_bad_gpu/H100", "conventions.json: \"gpu\": \"H10\" names no file of fp16/ (no a_H10_fp16.txt); \"gpu\" is the GPU name in the file names, here one of: H100"},
};
// clang-format on

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// The files (not folders: an empty output folder is no result) under root.
std::set<std::string> files(const fs::path& root) {
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (!e.is_directory()) names.insert(fs::relative(e.path(), root).string());
  return names;
}

// Runs `rpsim ARGS` in `dir` under a time limit; 124 = timed out (timeout(1)).
rpsim::test::CliResult run_in(const fs::path& dir, const std::string& args, int seconds) {
  return rpsim::test::run_shell("cd '" + dir.string() + "' && timeout -k 5 " + std::to_string(seconds) + " " +
                                rpsim::test::rpsim_binary() + " " + args + " </dev/null");
}

bool command_exists(const std::string& name) {
  static std::string help;
  if (help.empty()) help = rpsim::test::run_cli("--help").output;
  return help.find("\n  " + name + " ") != std::string::npos ||
         help.find("\n  " + name + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("bad input: exit 2, a message naming the input, no hang, no file left behind", "[cli][bad_input]") {
  const fs::path data = rpsim::test::source_dir() / "tests" / "data" / "bad_input";
  REQUIRE(fs::is_directory(data));
  REQUIRE(sizeof(kCases) / sizeof(kCases[0]) >= 30);
  const fs::path base = fs::temp_directory_path() / ("rpsim-bad-input-" + std::to_string(::getpid()));
  fs::remove_all(base);
  std::size_t index = 0, ran = 0;
  for (const BadInput& c : kCases) {
    ++index;
    if (!command_exists(c.command)) {
      WARN("rpsim has no command '" << c.command << "' in this build; case not run: " << c.args);
      continue;
    }
    const fs::path tmp = base / std::to_string(index);
    fs::create_directories(tmp / "a-dir");
    std::ofstream(tmp / "a-file") << "x\n";
    const auto before = files(tmp);
    const std::string args =
        replace_all(replace_all(replace_all(c.args, "{data}", data.string()), "{tmp}", tmp.string()),
                    "{source}", rpsim::test::source_dir().string());
    const std::string names =
        replace_all(replace_all(c.names, "{data}", data.string()), "{tmp}", tmp.string());
    const auto r = run_in(tmp, args, 120);
    ++ran;
    INFO("case " << index << ": rpsim " << args << "\n--- output ---\n" << r.output);
    CHECK(r.status != 124);  // no hang
    CHECK(r.status == 2);
    CHECK(r.output.find(names) != std::string::npos);
    CHECK(r.output.find("internal error") == std::string::npos);
    CHECK(files(tmp) == before);  // nothing written: no partial result, no temporary
  }
  fs::remove_all(base);
  CHECK(ran > 0);
}
