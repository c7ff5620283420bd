"""HTML report plumbing shared by every report privtab writes.

Reports are single self-contained HTML files (no external resources): figures are PNGs
drawn with matplotlib's object API (no pyplot state, no global backend) and embedded as
data URIs, each followed by a plain-language paragraph; tables left-align text columns and
right-align numeric ones. Used by :mod:`privtab.tabulate.report` (``report.html`` of a
release) and :mod:`privtab.semantics.report`. matplotlib is imported only when a figure is
drawn.

Every report opens the same way (:func:`page`): the title, a red ``banner`` when the
numbers are not private (seeded or noise-off test runs), then one ``headline`` sentence a
non-specialist can repeat; it ends with the full references of every work it cited
(:class:`~privtab.report.references.Citations`). Legends sit outside the axes
(:func:`legend_outside`) so they never cover data. Numbers shown as bounds on privacy loss
are rounded up (:func:`round_up`), never to a smaller value.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__: list[str] = []
"""Internal plumbing: no public names. ``FigureBlock``, ``new_figure``, ``png``,
``table_html``, ``page``, ``write_html``, ``figure_html``, ``legend_outside``, ``power_of_ten``
``round_up`` and ``round_up_sig`` serve privtab's own reports."""

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1000px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
td.num,th.num{text-align:right}
th{background:#f2f2f2}
figure{margin:1.5em 0} figure img{max-width:100%;border:1px solid #ddd}
figcaption{font-weight:600;margin-bottom:.3em} p.explain{margin-top:.4em}
.meta{color:#666;font-size:.9em}
.headline{font-size:1.15em;background:#eef4fb;border-left:4px solid #1f4e79;padding:.6em .9em;
margin:.6em 0 .3em}
p.sub{margin:.2em 0 1em}
.banner{color:#b00;font-weight:600;border:2px solid #b00;background:#fff4f4;padding:.6em .9em}
a.cite{color:#1f4e79;text-decoration:none} a.cite:hover{text-decoration:underline}
ol.references li{margin-bottom:.4em}
code{background:#f4f4f4;padding:0 .2em}
pre{background:#f4f4f4;padding:.6em;overflow-x:auto}
"""

_NUMBER = re.compile(r"^[−+-]?[\d,.]+(?:e[−+-]?\d+)?\s*%?$|^[—-]$", re.IGNORECASE)


@dataclass(frozen=True)
class FigureBlock:
    """One figure of a report: an id, a title, the PNG bytes and its explanation."""

    ident: str
    title: str
    png: bytes
    paragraph: str


def new_figure(width: float = 7.0, height: float = 4.2) -> tuple[Figure, Axes]:
    """A matplotlib figure with one grid axes (object API, constrained layout)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.grid(True, alpha=0.3)
    return fig, ax


def legend_outside(
    ax: Axes,
    handles: Sequence[Artist] | None = None,
    labels: Sequence[str] | None = None,
    *,
    where: str = "right",
    columns: int = 3,
) -> None:
    """The axes' legend outside the plotting area, so it never covers data.

    ``where="right"``: beside the axes, top-aligned; ``"top"``: above the axes in up to
    ``columns`` columns. ``handles``/``labels``: proxy entries (default: the labelled
    artists). The figure's constrained layout makes room for it."""
    if handles is None or labels is None:
        handles, labels = ax.get_legend_handles_labels()
    if where == "top":
        ax.legend(
            handles,
            labels,
            loc="lower center",
            bbox_to_anchor=(0.5, 1.02),
            ncols=max(1, min(len(labels), columns)),
            borderaxespad=0.0,
            fontsize=8,
        )
    else:
        ax.legend(
            handles,
            labels,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0,
            fontsize=8,
        )


def round_up(x: float, decimals: int = 2) -> str:
    """``x`` rounded *up* to ``decimals`` places, exactly (from the float's binary value):
    a stated privacy loss is never shown smaller than computed."""
    if not math.isfinite(x):
        return "∞" if x > 0 else str(x)
    q = Decimal(x).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_CEILING)
    return f"{q:.{decimals}f}"


def round_up_sig(x: float, digits: int = 6) -> str:
    """``x`` rounded *up* to ``digits`` significant digits (``:g``-style), exactly: a
    stated privacy parameter is never shown smaller than the value it stands for.

    The float rounded to ``digits`` significant digits is used when it lies no more than
    two units in the last place below the float (``2.63`` stays ``2.63``; ``4 × 2.56`` =
    10.240000000000002 is ``10.24``: a number computed in floating point is not more
    accurate than that); otherwise the float's binary value is rounded up (``24.40195…`` →
    ``24.402`` at 5 digits). The one rule for every ε or other bound known as a float; an
    exactly known ρ or ε is printed from its fraction by
    :func:`privtab.accounting.exact.exact_or_up`."""
    if not math.isfinite(x) or x <= 0:
        return f"{x:g}" if math.isfinite(x) or x < 0 else "∞"
    d = Decimal(x)
    step = Decimal(1).scaleb(d.adjusted() - digits + 1)
    q = d.quantize(step, rounding=ROUND_HALF_EVEN)
    if q < d - 2 * Decimal(math.ulp(x)):
        q = d.quantize(step, rounding=ROUND_CEILING)
    return f"{q.normalize():g}" if q != q.to_integral() else f"{int(q)}"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_of_ten(x: float) -> str:
    """``1e-10`` → ``10⁻¹⁰``; ``2.5e-9`` → ``2.5 × 10⁻⁹``; ``0`` → ``0``."""
    if x == 0:
        return "0"
    exp = math.floor(math.log10(abs(x)))
    mant = x / 10**exp
    if abs(mant - round(mant)) < 1e-9:
        mant = round(mant)
    power = "10" + str(exp).translate(_SUPERSCRIPT)
    return power if mant == 1 else f"{mant:g} × {power}"


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def table_html(
    head: Sequence[str], rows: Sequence[Sequence[str]], *, raw: Sequence[int] = ()
) -> str:
    """An HTML table; columns whose every cell is a number are right-aligned, text columns
    left-aligned. Cells are escaped except in the columns listed in ``raw`` (already HTML,
    e.g. citation links)."""
    numeric = [
        bool(rows) and all(_NUMBER.match(str(r[i]).strip()) for r in rows if i < len(r))
        for i in range(len(head))
    ]
    cls = [' class="num"' if n else "" for n in numeric]
    th = "".join(f"<th{cls[i]}>{html.escape(h)}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{cls[i] if i < len(cls) else ''}>{c if i in raw else html.escape(c)}</td>"
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def figure_html(f: FigureBlock) -> str:
    """One figure: caption, the embedded PNG and its explanation (HTML)."""
    b64 = base64.b64encode(f.png).decode("ascii")
    return (
        f'<figure id="{f.ident}" class="report-figure"><figcaption>{html.escape(f.title)}'
        f'</figcaption><img alt="{html.escape(f.title)}" src="data:image/png;base64,{b64}">'
        f'<p class="explain">{f.paragraph}</p></figure>'
    )


def page(
    title: str,
    subtitle: str,
    sections: Sequence[str],
    figs: Sequence[FigureBlock],
    *,
    note: str = "",
    banner: str = "",
    headline: str = "",
    references: str = "",
) -> str:
    """A whole HTML page.

    In order: the title; ``banner`` (HTML, shown in red: a warning that must be on the first
    screen); ``headline`` (HTML: the one sentence to quote, then any short explanation);
    the subtitle line; the sections (HTML); the figures; ``references`` (HTML, from
    :meth:`~privtab.report.references.Citations.html`)."""
    from privtab import __version__

    fig_html = "".join(figure_html(f) for f in figs)
    meta = " · ".join(x for x in (html.escape(subtitle), f"privtab {__version__}", note) if x)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        + (f'<div class="banner" role="alert">{banner}</div>' if banner else "")
        + headline
        + f'<p class="meta">{meta}</p>'
        + "".join(sections)
        + ("<h2>Figures</h2>" + fig_html if fig_html else "")
        + references
        + "</body></html>\n"
    )


def write_html(path: str | Path, text: str) -> Path:
    """Write a report atomically, readable by all (0644: a report is a published file)."""
    from privtab.atomic import atomic_write

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(p, text)
