"""Cells the numbered notebooks share (make_notebooks.py): the set-up that finds a study's
results, saving the figure, the measured-next-to-published table."""


def setup(study, figure, runs=False):
    """The set-up cell. runs=True (03, 05, 07): RPSIM_RUN may name a user's run folders instead,
    whose tables user_runs.py builds in the study's columns."""
    if runs:
        return _RUN_SETUP.format(study=study, figure=figure, stem=figure.rsplit(".", 1)[0])
    return _STUDY_SETUP.format(study=study, figure=figure)


_STUDY_SETUP = """import json, os, pathlib
import numpy as np
import pandas as pd
import matplotlib
import matplotlib.pyplot as plt

# Results folder: $RPSIM_RESULTS, else ../results beside this notebook.
RESULTS = pathlib.Path(os.environ.get("RPSIM_RESULTS", "../results")).resolve()
STUDY = RESULTS / "{study}"
FIGURE = RESULTS / "figures" / "{figure}"
if not (STUDY / "meta.json").exists():
    raise FileNotFoundError(f"{{STUDY}}/meta.json missing: run `rpsim study {study}` first")
meta = json.loads((STUDY / "meta.json").read_text())
print(f"study {{meta['study']}} ({{'quick' if meta['quick'] else 'full'}}), commit {{meta['git_commit'][:12]}}, "
      f"{{meta['wall_time_s']:.1f}} s")
def csv(name):
    return pd.read_csv(STUDY / name)"""

_RUN_SETUP = """import json, os, pathlib, sys
import numpy as np
import pandas as pd
import matplotlib
import matplotlib.pyplot as plt

# Results folder: $RPSIM_RESULTS, else ../results beside this notebook. A user's own runs
# instead of the study: $RPSIM_RUN names run folders (several separated by ':') that
# `rpsim train --out`, rpsim.torch.Trainer(out=...) or rpsim.torch.Telemetry(out=...) wrote;
# user_runs.py (beside this notebook) builds the study's tables from their files.
RESULTS = pathlib.Path(os.environ.get("RPSIM_RESULTS", "../results")).resolve()
RUN_MODE = bool(os.environ.get("RPSIM_RUN", "").strip())
if RUN_MODE:
    sys.path.insert(0, os.path.abspath(""))
    import user_runs
    RUNS = user_runs.load(os.environ["RPSIM_RUN"])
    TABLES = user_runs.tables("{study}", RUNS)
    meta = user_runs.meta(RUNS)
    FIGURE = RESULTS / "figures" / "{stem}-run.png"
    print("\\n".join(meta["runs"]))
    def csv(name):
        return TABLES[name].copy()
    def has(name):
        return name in TABLES
else:
    STUDY = RESULTS / "{study}"
    FIGURE = RESULTS / "figures" / "{figure}"
    if not (STUDY / "meta.json").exists():
        raise FileNotFoundError(f"{{STUDY}}/meta.json missing: run `rpsim study {study}` first, "
                                "or set RPSIM_RUN to your own run folder")
    meta = json.loads((STUDY / "meta.json").read_text())
    print(f"study {{meta['study']}} ({{'quick' if meta['quick'] else 'full'}}), commit {{meta['git_commit'][:12]}}, "
          f"{{meta['wall_time_s']:.1f}} s")
    def csv(name):
        return pd.read_csv(STUDY / name)
    def has(name):
        return (STUDY / name).exists()"""


SAVE = '''FIGURE.parent.mkdir(parents=True, exist_ok=True)
fig.savefig(FIGURE, dpi=120, bbox_inches="tight")
print("saved", FIGURE)'''

COMPARE = '''def compare(rows):
    """Prints measured next to published, one line each, and keeps the table as
    Markdown beside the figure (FIGURE with .md): quantity, ours, the paper's,
    where it says so, and whether the setting is the same."""
    columns = ["quantity", "measured", "published", "source", "same setting"]
    table = pd.DataFrame([tuple(r) + ("",) * (5 - len(r)) for r in rows], columns=columns)
    with pd.option_context("display.max_colwidth", 80, "display.width", 200):
        print(table.to_string(index=False))
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(str(v).replace("|", "/") for v in r) + " |" for r in table.itertuples(index=False)]
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    FIGURE.with_suffix(".md").write_text("\\n".join(lines) + "\\n")
    return table'''

# A notebook that computes through the Python module (built into build/python;
# render.sh puts that on PYTHONPATH).
LIVE_SETUP = '''try:
    import rpsim
except ImportError as e:
    raise ImportError("the Python module rpsim was not found: build rpsim (Debian's python3-dev, "
                      "python3-numpy, pybind11-dev) and set PYTHONPATH=build/python, or "
                      "`cmake --install build --component python`") from e
print("rpsim module:", rpsim.__file__)'''
