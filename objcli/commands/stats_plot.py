"""``objcli stats --plot FILE``: the example lengths, the fractions of positions that carry loss or
padding, and for a mixture each source's share of the tokens beside the one asked, in one figure
(matplotlib's Agg backend, the ``plot`` extra), written whole and then renamed."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import ObjcliError

PLOT_FORMATS = ("png", "pdf", "svg")  # what matplotlib's Agg backend writes with no other package


def check_plot_path(path: str) -> str:
    """The format of a ``--plot`` file, or a one-line error: a folder, a name with no extension (a
    hidden ``.png``), an extension matplotlib cannot write, a folder that does not exist."""
    target = Path(path)
    if path.endswith(("/", "\\")) or target.is_dir():
        raise ObjcliError(f"--plot {path}: is a folder; name the file to write, such as {target / 'stats.png'}")
    fmt = target.suffix.lower().removeprefix(".")
    if not target.stem or fmt not in PLOT_FORMATS:
        raise ObjcliError(f"--plot {path}: name a .png, .pdf or .svg file (the extension picks the format)")
    if not target.resolve().parent.is_dir():
        raise ObjcliError(f"--plot {path}: the folder {target.parent} does not exist; create it or choose another")
    return fmt


def plot(stats: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mixture = stats.get("mixture") or {}
    panels = 3 if mixture else 2
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4), gridspec_kw={"width_ratios": [2, 1, 1][:panels]})
    lengths, fractions = axes[:2]
    histogram = stats["example_length_histogram"]
    edges = np.array(histogram["edges"])
    lengths.bar(edges[:-1], histogram["counts"], width=np.diff(edges), align="edge", color="#4878a8")
    lengths.set(title=f"Example lengths ({stats['objective']})", xlabel="tokens", ylabel="examples")
    names = ["supervised", "padding"]
    values = [stats["supervised_fraction"] or 0.0, stats["padding_fraction"]]
    for name, d in stats.get("categories", {}).items():
        names.append(f"sup. {name}")
        values.append(d["supervised_fraction"])
    fractions.barh(names, values, color=["#58a05a", "#c0504d"] + ["#8064a2"] * (len(names) - 2))
    fractions.set(xlim=(0, 1), title="Fraction of positions")
    if mixture:  # each source's share of the tokens written, beside the share asked (or its blend's)
        _plot_shares(axes[2], mixture)
    figure.tight_layout()
    temporary = Path(path).with_name(f".{Path(path).name}.objcli-tmp")
    try:  # written whole, then renamed: a failure never leaves half a picture under the name
        figure.savefig(temporary, dpi=100, format=check_plot_path(path))
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
        plt.close(figure)


def _plot_shares(axis, mixture: dict) -> None:
    names = list(mixture)
    rows = np.arange(len(names))
    written = [d.get("share", 0.0) or 0.0 for d in mixture.values()]
    asked = [d.get("asked_share", d.get("blend_share")) for d in mixture.values()]
    axis.barh(rows - 0.2, written, height=0.4, color="#4878a8", label="written")
    if all(a is not None for a in asked):
        axis.barh(rows + 0.2, asked, height=0.4, color="#c9c9c9", label="asked")
    axis.set_yticks(rows, names)
    axis.set(xlim=(0, 1), title="Share of tokens by source")
    axis.legend(loc="lower right", fontsize="small")
