"""The cells of 01-summation (make_notebooks.py writes the notebook): the study's CSVs, then the
same stagnation and error growth computed live through the Python module `rpsim`."""
from common_cells import COMPARE, LIVE_SETUP, SAVE, setup

CELLS = [
    ("md", """# 01 · Summation: how does rounding error grow with the number of terms?

Recursive summation in a p-bit format under round-to-nearest **stagnates**: once the running sum reaches
2^p, adding 1 is a tie that rounds back to the even sum, so fp16 (p = 11) stops at 2048 and bfloat16
(p = 8) at 256. Stochastic rounding (SR) is unbiased, so the SR sum keeps growing and its error behaves like
a random walk of standard deviation at most sqrt(sum u_i^2/4) (Connolly, Higham & Mary, *SIAM J. Sci. Comput.*
43(1), 2021).

For random data, the error of sums and dot products is compared with the deterministic bound
gamma_n = nu/(1-nu) and the probabilistic bound ~ sqrt(n)·u of Higham & Mary (*SIAM J. Sci. Comput.* 41(5),
2019), for recursive, FMA, pairwise, blocked, compensated (Kahan) and tensor-core accumulation.

Tables: `stagnation.csv`, `trajectory.csv`, `sr_sums.csv`, `error_vs_n.csv` written by `rpsim study summation`."""),
    ("code", setup("summation", "01-summation.png")),
    ("code", '''stagnation = csv("stagnation.csv")
trajectory = csv("trajectory.csv")
sr = csv("sr_sums.csv")
err = csv("error_vs_n.csv")
stagnation'''),
    ("code", '''fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))

ax = axes[0]
ones = trajectory[trajectory.addend == 1]
for (fmt, rnd), g in ones.groupby(["format", "rounding"]):
    ax.plot(g.terms, g.computed_sum, label=f"{fmt} {rnd.upper()}", lw=1.5, ls="-" if rnd == "sr" else "--")
top = ones.terms.max()
ax.plot([0, top], [0, top], color="k", lw=0.8, label="exact")
for v in stagnation[stagnation.format.isin(["binary16", "bfloat16"])].stagnation_value.dropna():
    ax.axhline(v, color="grey", lw=0.5, ls=":")
ax.set_xscale("log"); ax.set_yscale("log")
ax.set_xlabel("number of ones added"); ax.set_ylabel("computed sum")
ax.set_title("(a) sum of ones: RNE stagnates, SR does not")
ax.legend(fontsize=8)

def error_panel(ax, data, title):
    med = data.groupby(["model", "n"]).relative_error.median().reset_index()
    for model, g in med.groupby("model", sort=False):
        y = g.relative_error.clip(lower=1e-12)
        ax.plot(g.n, y, marker="o", ms=3, label=model)
    # Bounds for the RNE accumulators in this panel.
    for fmt_name, u in data[data.rounding == "rne"].groupby("accumulator_format").unit_roundoff.first().items():
        n = np.array(sorted(data.n.unique()), dtype=float)
        ax.plot(n, np.minimum(n * u / np.maximum(1 - n * u, 1e-300), 1e3), "k--", lw=0.8)
        ax.plot(n, np.sqrt(n) * u, "k:", lw=0.8)
        ax.annotate(f"gamma_n, u={u:.0e}", (n[-1], min(n[-1] * u, 1)), fontsize=7, ha="right", va="bottom")
        ax.annotate(f"sqrt(n)u", (n[-1], np.sqrt(n[-1]) * u), fontsize=7, ha="right", va="top")
    ax.set_xscale("log"); ax.set_yscale("log"); ax.set_ylim(1e-12, 10)
    ax.set_xlabel("n"); ax.set_ylabel("relative error  |s - ŝ| / Σ|x_i y_i|  (median)")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)

sums = err[(err.operation == "sum") & err.accumulator_format.isin(["binary16"])]
error_panel(axes[1], sums, "(b) sum of uniform data, fp16 accumulation")
dots = err[(err.operation == "dot") & err.accumulator_format.isin(["binary32"])]
error_panel(axes[2], dots, "(c) fp16 dot products, fp32 / tensor-core accumulation")
fig.tight_layout()'''),
    ("code", SAVE),
    ("code", '''fig2, axes2 = plt.subplots(1, 2, figsize=(12, 4.5))
error_panel(axes2[0], err[(err.operation == "dot") & (err.accumulator_format == "binary16")],
            "fp16 dot products, fp16 accumulation")
error_panel(axes2[1], err[(err.operation == "sum") & (err.accumulator_format == "bfloat16")],
            "sum of uniform data, bf16 accumulation")
fig2.tight_layout()'''),
    ("md", "## Measured next to published"),
    ("code", COMPARE + '''

def stag(fmt):
    row = stagnation[stagnation.format == fmt]
    return float(row.stagnation_value.iloc[0]) if len(row) else float("nan")

rows = [
    ("fp16 RNE sum of ones stops at", stag("binary16"), 2048, "2^11; Connolly, Higham & Mary 2021, Sec. 1"),
    ("bf16 RNE sum of ones stops at", stag("bfloat16"), 256, "2^8; same argument"),
]
for (fmt, addend, terms), g in sr.groupby(["format", "addend", "terms"]):
    rows.append((f"{fmt} SR sum of {terms} x {addend}: trials within 6 sigma + bias",
                 f"{int(g.within_bound.sum())}/{len(g)} (worst |err| = {(g.error.abs() / g.sigma).max():.2f} sigma)",
                 "all (unbiased, std <= sqrt(sum u_i^2/4))", "Connolly, Higham & Mary 2021, Thm 4.x"))
big = err[err.n == err.n.max()]
for model in ["sequential:binary16:rne", "sequential:binary16:sr", "pairwise:binary16:rne"]:
    g = big[(big.operation == "sum") & big.model.str.startswith(model)]
    if len(g):
        ratio = (g.relative_error / g.bound_sqrt_n_u).median()
        rows.append((f"{model} sum, n={int(g.n.iloc[0])}: error / (sqrt(n) u)", f"{ratio:.3g}",
                     "O(1) for RNE on random data (lambda ~ 1); SR: O(1) always",
                     "Higham & Mary 2019, Sec. 4; Connolly et al. 2021"))
compare(rows);'''),
    ("md", """## Live through the module

The same stagnation and SR sums computed here through `rpsim`, the Python module over the same C++ core
(README, "rpsim from Python"), rather than read from the CSVs: a recursive sum of ones rounded after every
addition by `rpsim.round` (64 SR trials side by side in one array; element i of the call for term k draws
`counter_random(seed, stream=k, i)`), then fp16 dot products through `rpsim.gemm` under sequential RNE,
sequential SR and H100 tensor-core accumulation. The RNE stagnation values must equal the study's."""),
    ("code", LIVE_SETUP),
    ("code", """def sum_of_ones(fmt, rounding, terms, trials=1, seed=0):
    s = np.zeros(trials)
    for k in range(terms):  # s + 1 is exact in binary64; the rounding is rpsim's
        s = rpsim.round(s + 1.0, fmt, rounding, seed=seed, stream=k)
    return s

live = []
for fmt, p in [("binary16", 11), ("bfloat16", 8)]:
    terms = 2 ** (p + 2)
    rne = sum_of_ones(fmt, "rne", terms)[0]
    sr_sums = sum_of_ones(fmt, "sr", terms, trials=64, seed=1)
    assert rne == stag(fmt), f"{fmt}: live RNE sum {rne} differs from the study's {stag(fmt)}"
    live.append((fmt, terms, rne, stag(fmt), sr_sums.mean(), sr_sums.std(), (sr_sums.mean() - terms) / terms))
pd.DataFrame(live, columns=["format", "ones added", "RNE sum (live)", "RNE stagnation (study CSV)",
                            "SR mean of 64", "SR std", "SR relative bias"])"""),
    ("code", """rng = np.random.default_rng(0)
models = ["sequential:fp16:rne", "sequential:fp16:sr", "tc:h100:fp16:fp32"]
rows = []
for n in [64, 256, 1024, 4096, 16384]:
    for trial in range(5):
        x = rpsim.round(rng.uniform(0, 1, n), "fp16")
        y = rpsim.round(rng.uniform(0, 1, n), "fp16")
        exact = float(np.dot(x, y))  # fp16 products are exact in binary64; n 2^-53 is negligible here
        for model in models:
            d = rpsim.gemm(x[None, :], y[:, None], model=model)[0, 0]
            rows.append((model, n, abs(d - exact) / exact))
live_err = pd.DataFrame(rows, columns=["model", "n", "relative_error"])
med = live_err.groupby(["model", "n"]).relative_error.median().unstack(0)
fig3, ax = plt.subplots(figsize=(6, 4.2))
for model in models:
    ax.plot(med.index, med[model].clip(lower=1e-12), marker="o", ms=3, label=model)
n = med.index.to_numpy(dtype=float)
ax.plot(n, np.sqrt(n) * 2.0**-11, "k:", lw=0.8, label="sqrt(n) u, u = 2^-11")
ax.set_xscale("log"); ax.set_yscale("log")
ax.set_xlabel("n"); ax.set_ylabel("relative error of the dot product (median of 5)")
ax.set_title("live: fp16 dot products through rpsim.gemm")
ax.legend(fontsize=7)
med"""),
]
