"""rpsim.train: one `rpsim train` run from Python, its steps.csv and histograms.csv as columns."""
import json
import os

import numpy as np

from . import _core


def _column(values):
    """One CSV column as int64 where every cell is an integer, else float64 (an empty cell is
    NaN: a shadow column without shadow), else the strings."""
    try:
        return np.array([int(v) for v in values], dtype=np.int64)
    except ValueError:
        pass
    try:
        return np.array([float(v) if v != "" else np.nan for v in values], dtype=np.float64)
    except ValueError:
        return np.array(values, dtype=object)


def table(csv_text, as_frame=None):
    """CSV text (a header, then rows) as {column: array}, or a pandas DataFrame when as_frame is
    True (None: a DataFrame when pandas can be imported). Values are read from the text the CLI
    writes, so they equal the CSV's."""
    lines = [line for line in csv_text.splitlines() if line]
    header = lines[0].split(",") if lines else []
    rows = [line.split(",") for line in lines[1:]]
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"CSV row {i + 2} has {len(row)} fields, the header {len(header)}")
    columns = {name: _column([row[j] for row in rows]) for j, name in enumerate(header)}
    if as_frame is None:
        try:
            import pandas  # noqa: F401  (Debian: python3-pandas)
            as_frame = True
        except ImportError:
            as_frame = False
    if as_frame:
        import pandas
        return pandas.DataFrame(columns)
    return columns


class TrainResult:
    """steps: one row per optimizer step (the columns of steps.csv); histograms: histograms.csv;
    evaluations: evaluations.csv (step, epoch, test loss and accuracy, emulated and FP64 shadow),
    the same column names; meta: meta.json as a dict; ignored and notes: what the config loader
    said about framework fields."""

    def __init__(self, raw, as_frame):
        self.steps = table(raw["steps_csv"], as_frame)
        self.histograms = table(raw["histograms_csv"], as_frame)
        self.meta = raw["meta"]
        self.evaluations = table(raw["evaluations_csv"], as_frame)
        self.ignored = raw["ignored"]
        self.notes = raw["notes"]
        self.vocabulary = raw["vocabulary"]

    def __repr__(self):
        m = self.meta
        return (f"<rpsim.TrainResult {m['name']}: policy {m['policy'].get('name', '?')}, {m['steps']} steps "
                f"({m['skipped_steps']} skipped), final loss scale {m['loss_scaler']['final_scale']:g}>")


def train(config, *, out=None, threads=0, progress=False, as_frame=None, **overrides):
    """Run `rpsim train` on `config` (a dict, or the path of a JSON file in rpsim's, DeepSpeed's or
    Keras' vocabulary) and return a TrainResult: the same run as the CLI, the same CSV values.
    Either may say "extends": "base.json" (a file's base beside it, a dict's relative to the working
    folder): the base with this config merged on (RFC 7386; null removes a key), as the CLI reads it.

    overrides: keys as `--set` takes them, a dot or a double underscore between levels
    (steps=20, optimizer__lr=0.1, **{"loss_scaler.init_scale": 1024}); values as JSON.
    out: a directory to also write steps.csv, histograms.csv, evaluations.csv and meta.json into
    (atomically). A config without "steps" trains whole epochs: a UserWarning says how many steps.
    threads: OpenMP threads, 0 is the default. progress: progress lines on stderr.
    as_frame: steps and histograms as pandas DataFrames (None: when pandas is installed) or as
    dicts of NumPy arrays. Unknown keys and wrong types raise ValueError naming every one of them;
    Ctrl-C stops at a step boundary.
    """
    if isinstance(config, os.PathLike):
        config = os.fspath(config)
    sets = [f"{key.replace('__', '.')}={json.dumps(value)}" for key, value in overrides.items()]
    if out is not None:
        out = os.fspath(out)
    _core.keep_freed_memory()  # as the rpsim binary runs it (rpsim/io/process.hpp)
    raw = _core._train(config, sets, out, threads, progress)
    return TrainResult(raw, as_frame)
