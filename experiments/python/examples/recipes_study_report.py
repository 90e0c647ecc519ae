"""Issue #37's recipe study, read back: per model and recipe, the final held-out (validation) loss minus
its FP64 shadow's, mean and sample standard deviation over seeds, the same relative to the shadow and
relative to bf16-amp of the same seed, and the paired differences mxfp8 rceil - floor and nvfp4
te-2026-02 - te-2026-03 (per seed, then mean and spread); draws one figure.

  /usr/bin/python3 experiments/python/examples/recipes_study_report.py \\
      --gpt results/recipes-study/gpt --llama results/recipes-study/llama \\
      [--csv results/recipes-study/report.csv] [--figure results/recipes-study/12-recipes.png]

--gpt is an `rpsim sweep experiments/configs/sweep-recipes.json --out DIR` folder (summary.csv: run_id,
policy, seed; DIR/<run_id>/evaluations.csv), --llama an `llama_study.py --recipes --out DIR` folder
(summary.csv and evaluations.csv with run, policy, seed). Either may be left out. Only numbers read from
those files are printed; a missing file, column or FP64 shadow is an error naming it (exit 2)."""
import argparse
import csv
import json
import math
import os
import statistics
import sys

REFERENCE = "bf16-amp"
# The recipes' defaults, so that "mxfp8" and {"name": "mxfp8", "fp8": {"scale_rule": "floor"}} are one
# recipe: README.md's policy table (mxfp8's fp8.scale_rule is the OCP floor; nvfp4's fp8.nvfp4_formula
# is te-2026-03). A run's meta.json writes only the options that differ from these.
DEFAULTS = {"mxfp8": {"scale_rule": "floor"}, "nvfp4": {"nvfp4_formula": "te-2026-03"}}
ORDER = ("bf16-amp", "fp8", "fp8-blockwise", "mxfp8 floor", "mxfp8 rceil", "nvfp4 te-2026-03", "nvfp4 te-2026-02")
# Paired per seed: the two scale rules, the two TE formulas, and NVFP4 against FP8 (NVIDIA's comparison,
# arXiv 2509.25149).
PAIRS = (("mxfp8 rceil", "mxfp8 floor"), ("nvfp4 te-2026-02", "nvfp4 te-2026-03"), ("nvfp4 te-2026-03", "fp8"))
COLUMNS = ["model", "row", "seeds", "final_loss_mean_nats", "shadow_loss_mean_nats", "gap_mean_nats",
           "gap_std_nats", "gap_rel_mean_pct", "gap_rel_std_pct", "vs_reference_rel_mean_pct",
           "vs_reference_rel_std_pct", "per_seed_nats"]


class ReportError(ValueError):
    """A study folder that cannot be read: the message names the file, column or value."""


def recipe_label(policy):
    """The recipe a policy value names, as summary.csv writes it (a name, or a policy object as JSON):
    its name, then the values of its fp8 options with the defaults filled in ("mxfp8 rceil")."""
    text = policy.strip()
    if not text.startswith("{"):
        obj = {"name": text}
    else:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ReportError(f"policy {policy!r}: not a name nor a JSON policy object ({e})") from None
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ReportError(f"policy {policy!r}: no \"name\"")
    extra = sorted(k for k in obj if k not in ("name", "fp8"))
    options = {**DEFAULTS.get(name, {}), **obj.get("fp8", {})}
    parts = [name] + [str(options[k]) for k in sorted(options)] + [f"{k}={json.dumps(obj[k])}" for k in extra]
    return " ".join(parts)


def _rows(path, needed):
    if not os.path.isfile(path):
        raise ReportError(f"{path}: no such file")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise ReportError(f"{path}: no column {', '.join(missing)} (has {', '.join(reader.fieldnames or [])})")
        rows = list(reader)
    if not rows:
        raise ReportError(f"{path}: no rows")
    return rows


def _number(path, row, column):
    try:
        return float(row[column])
    except (TypeError, ValueError):
        raise ReportError(f"{path}: {column} {row[column]!r} is not a number") from None


def _record(model, policy, seed, evals, path):
    """One run: its recipe, seed, held-out curve [(step, emulated, shadow)] and final point."""
    curve = sorted((int(_number(path, r, "step")), _number(path, r, "test_loss_emulated_nats"),
                    _number(path, r, "test_loss_fp64_nats")) for r in evals)
    if not curve:
        raise ReportError(f"{path}: no evaluation of run {policy!r} seed {seed}")
    step, loss, shadow = curve[-1]
    return {"model": model, "recipe": recipe_label(policy), "seed": seed, "step": step, "loss": loss,
            "shadow": shadow, "curve": curve}


def read_gpt(folder):
    """The sweep's runs: summary.csv's run_id, policy, seed, each run's evaluations.csv."""
    summary = os.path.join(folder, "summary.csv")
    out = []
    for r in _rows(summary, ["run_id", "policy", "seed"]):
        evals = os.path.join(folder, r["run_id"], "evaluations.csv")
        rows = _rows(evals, ["step", "test_loss_emulated_nats", "test_loss_fp64_nats"])
        out.append(_record("GPT", r["policy"], int(_number(summary, r, "seed")), rows, evals))
    return out


def read_llama(folder):
    """llama_study.py's runs: summary.csv's run, policy, seed; evaluations.csv's rows of each."""
    summary, evals = os.path.join(folder, "summary.csv"), os.path.join(folder, "evaluations.csv")
    runs = _rows(summary, ["run", "policy", "seed"])
    rows = _rows(evals, ["run", "seed", "step", "test_loss_emulated_nats", "test_loss_fp64_nats"])
    return [_record("LLaMA-style", r["policy"], int(_number(summary, r, "seed")),
                    [e for e in rows if e["run"] == r["run"] and e["seed"] == r["seed"]], evals) for r in runs]


def _mean_std(values):
    """Mean and sample standard deviation (n - 1; NaN for one value). A NaN is kept, not dropped."""
    if not values:
        return math.nan, math.nan
    mean = math.fsum(values) / len(values)
    if len(values) == 1 or math.isnan(mean):
        return mean, math.nan
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _check_one_run_each(records):
    seen = set()
    for r in records:
        key = (r["model"], r["recipe"], r["seed"])
        if key in seen:
            raise ReportError(f"{r['model']}: recipe {r['recipe']!r} seed {r['seed']} appears twice")
        seen.add(key)


def summarize(records):
    """The report's rows (dicts with COLUMNS): one per model and recipe, then one per model and pair of
    PAIRS present. A pair's gap is (a - shadow) - (b - shadow) per seed, its relative gap
    100 (a - b) / b per seed (final held-out losses), each then mean and sample std over the seeds."""
    _check_one_run_each(records)
    table = []
    for model in dict.fromkeys(r["model"] for r in records):
        runs = [r for r in records if r["model"] == model]
        recipes = sorted(dict.fromkeys(r["recipe"] for r in runs),
                         key=lambda k: (ORDER.index(k) if k in ORDER else len(ORDER), k))
        ref = {r["seed"]: r["loss"] for r in runs if r["recipe"] == REFERENCE}
        by = {k: {r["seed"]: r for r in runs if r["recipe"] == k} for k in recipes}
        for k in recipes:
            rs = [by[k][s] for s in sorted(by[k])]
            gaps = [r["loss"] - r["shadow"] for r in rs]
            rel = [100 * (r["loss"] - r["shadow"]) / r["shadow"] for r in rs]
            vs = [100 * (r["loss"] - ref[r["seed"]]) / ref[r["seed"]] for r in rs if r["seed"] in ref]
            row = {"model": model, "row": k, "seeds": " ".join(str(r["seed"]) for r in rs),
                   "final_loss_mean_nats": _mean_std([r["loss"] for r in rs])[0],
                   "shadow_loss_mean_nats": _mean_std([r["shadow"] for r in rs])[0],
                   "per_seed_nats": " ".join("%.6f" % g for g in gaps)}
            row["gap_mean_nats"], row["gap_std_nats"] = _mean_std(gaps)
            row["gap_rel_mean_pct"], row["gap_rel_std_pct"] = _mean_std(rel)
            row["vs_reference_rel_mean_pct"], row["vs_reference_rel_std_pct"] = (
                _mean_std(vs) if len(vs) == len(rs) else (math.nan, math.nan))
            table.append(row)
        for a, b in PAIRS:
            if a not in by or b not in by:
                continue
            seeds = sorted(set(by[a]) & set(by[b]))
            diffs = [(by[a][s]["loss"] - by[a][s]["shadow"]) - (by[b][s]["loss"] - by[b][s]["shadow"]) for s in seeds]
            rel = [100 * (by[a][s]["loss"] - by[b][s]["loss"]) / by[b][s]["loss"] for s in seeds]
            row = {"model": model, "row": f"{a} - {b}", "seeds": " ".join(map(str, seeds)),
                   "per_seed_nats": " ".join("%+.6f" % d for d in diffs)}
            row["gap_mean_nats"], row["gap_std_nats"] = _mean_std(diffs)
            row["gap_rel_mean_pct"], row["gap_rel_std_pct"] = _mean_std(rel)
            table.append(row)
    return table


def _fmt(v, spec):
    return "" if v is None or v == "" else "nan" if isinstance(v, float) and math.isnan(v) else format(v, spec)


def markdown(table):
    """The rows as one Markdown table per model (gap and spread in nats and per cent)."""
    lines = []
    for model in dict.fromkeys(r["model"] for r in table):
        lines += [f"{model}:", "", "| recipe | seeds | final held-out loss | FP64 shadow | minus shadow, mean +- std "
                  "(nats) | relative to shadow | relative to bf16-amp | per seed (nats) |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        for r in (r for r in table if r["model"] == model):
            pct, pair = r.get("gap_rel_mean_pct"), " - " in r["row"]
            lines.append(
                f"| {r['row']} | {r['seeds']} | {_fmt(r.get('final_loss_mean_nats'), '.4f')} | "
                f"{_fmt(r.get('shadow_loss_mean_nats'), '.4f')} | {_fmt(r['gap_mean_nats'], '+.4f')} +- "
                f"{_fmt(r['gap_std_nats'], '.4f')} | "
                + f"{_fmt(pct, '+.2f')}% +- {_fmt(r['gap_rel_std_pct'], '.2f')}%"
                + (" of the second's loss (paired per seed) | " if pair else
                   f" | {_fmt(r['vs_reference_rel_mean_pct'], '+.2f')}% +- "
                   f"{_fmt(r['vs_reference_rel_std_pct'], '.2f')}%")
                + f" | {r['per_seed_nats']} |")
        lines.append("")
    return "\n".join(lines)


def write_csv(table, path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in table:
            w.writerow({c: ("%.17g" % r[c] if isinstance(r.get(c), float) else r.get(c, "")) for c in COLUMNS})


def _curves(runs, recipe, model):
    """(steps, mean held-out loss, mean and std of loss minus shadow) over the recipe's seeds."""
    rs = [r for r in runs if r["recipe"] == recipe]
    steps = [p[0] for p in rs[0]["curve"]]
    if any([p[0] for p in r["curve"]] != steps for r in rs):
        raise ReportError(f"{model}: {recipe}'s seeds were evaluated at different steps")
    loss = [statistics.fmean(r["curve"][n][1] for r in rs) for n in range(len(steps))]
    gaps = [_mean_std([r["curve"][n][1] - r["curve"][n][2] for r in rs]) for n in range(len(steps))]
    shadow = [statistics.fmean(r["curve"][n][2] for r in rs) for n in range(len(steps))]
    return steps, loss, shadow, gaps


def _draw_model(axes, model, records, table):
    top, middle, bottom = axes
    rows = [r for r in table if r["model"] == model and " - " not in r["row"]]
    runs = [r for r in records if r["model"] == model]
    for i, row in enumerate(rows):
        steps, loss, shadow, gaps = _curves(runs, row["row"], model)
        top.plot(steps, loss, "-o", ms=2, lw=1, color=f"C{i}", label=row["row"])
        mean = [g[0] for g in gaps]
        std = [0 if math.isnan(g[1]) else g[1] for g in gaps]
        middle.plot(steps, mean, "-o", ms=2, lw=1, color=f"C{i}", label=row["row"])
        middle.fill_between(steps, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                            color=f"C{i}", alpha=0.08)
        finals = [r["loss"] - r["shadow"] for r in runs if r["recipe"] == row["row"]]
        bottom.plot([i] * len(finals), finals, "o", color=f"C{i}", alpha=0.6)
        bottom.errorbar([i + 0.15], [row["gap_mean_nats"]], yerr=[0 if math.isnan(row["gap_std_nats"])
                                                                 else row["gap_std_nats"]], fmt="s",
                        color=f"C{i}", capsize=3)
    top.plot(steps, shadow, "k--", lw=1.2, label="FP64 shadow")
    seeds = ", ".join(map(str, sorted({r["seed"] for r in runs})))
    top.set_title(f"{model}: held-out loss, mean over seeds {seeds}")
    top.set_xlabel("step"), top.set_ylabel("nats/char"), top.legend(fontsize=7)
    middle.axhline(0, color="k", lw=0.8)
    middle.set_title(f"{model}: held-out loss minus FP64 shadow (mean +- std)")
    middle.set_xlabel("step"), middle.set_ylabel("nats/char")
    bottom.axhline(0, color="k", lw=0.8)
    bottom.set_xticks(range(len(rows)))
    bottom.set_xticklabels([r["row"] for r in rows], rotation=30, ha="right", fontsize=8)
    bottom.set_ylabel("final held-out loss minus FP64 shadow (nats)")
    bottom.set_title(f"{model}: final, per seed (dots) and mean +- std (squares)")


def draw(records, table, path):
    """Per model: the held-out loss against step (mean over seeds) beside the FP64 shadow's; the same
    minus the shadow, mean +- std over seeds; each recipe's final loss minus its shadow per seed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models = list(dict.fromkeys(r["model"] for r in records))
    fig, axes = plt.subplots(3, len(models), figsize=(6.5 * len(models), 12), squeeze=False)
    for j, model in enumerate(models):
        _draw_model([axes[i][j] for i in range(3)], model, records, table)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpt", help="the sweep's folder (rpsim sweep experiments/configs/sweep-recipes.json --out DIR)")
    ap.add_argument("--llama", help="llama_study.py --recipes --out DIR's folder")
    ap.add_argument("--csv", help="write the table here as CSV")
    ap.add_argument("--figure", help="draw the figure into this PNG")
    a = ap.parse_args(argv)
    if not a.gpt and not a.llama:
        ap.error("give --gpt DIR, --llama DIR or both")
    try:
        records = (read_gpt(a.gpt) if a.gpt else []) + (read_llama(a.llama) if a.llama else [])
        table = summarize(records)
        print(markdown(table))
        if a.csv:
            write_csv(table, a.csv)
        if a.figure:
            draw(records, table, a.figure)
    except ReportError as e:
        ap.error(str(e))  # exit status 2, as the CLI's bad input
    return table


if __name__ == "__main__":
    main(sys.argv[1:])
