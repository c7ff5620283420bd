"""HTML report plumbing shared by every report privtab writes.

Reports are single self-contained HTML files (no external resources): figures are PNGs
drawn with matplotlib's object API (no pyplot state, no global backend) and embedded as
data URIs, each followed by a plain-language paragraph; tables left-align text columns and
right-align numeric ones. Used by :mod:`privtab.tabulate.report` (``report.html`` of a
release) and :mod:`privtab.semantics.report`. matplotlib is imported only when a figure is
drawn.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__: list[str] = []
"""Internal plumbing: no public names. ``FigureBlock``, ``new_figure``, ``png``,
``table_html``, ``page`` and ``write_html`` serve privtab's own reports."""

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
.headline{font-size:1.15em;background:#eef4fb;border-left:4px solid #1f4e79;padding:.6em .9em}
.banner{color:#b00;font-weight:600}
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


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def table_html(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table; columns whose every cell is a number are right-aligned."""
    numeric = [
        bool(rows) and all(_NUMBER.match(str(r[i]).strip()) for r in rows if i < len(r))
        for i in range(len(head))
    ]
    cls = [' class="num"' if n else "" for n in numeric]
    th = "".join(f"<th{cls[i]}>{html.escape(h)}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{cls[i] if i < len(cls) else ''}>{html.escape(c)}</td>" for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def page(
    title: str,
    subtitle: str,
    sections: Sequence[str],
    figs: Sequence[FigureBlock],
    *,
    note: str = "",
) -> str:
    """A whole HTML page: title, subtitle line, the sections (HTML), then the figures."""
    from privtab import __version__

    fig_html = []
    for f in figs:
        b64 = base64.b64encode(f.png).decode("ascii")
        fig_html.append(
            f'<figure id="{f.ident}" class="report-figure"><figcaption>{html.escape(f.title)}'
            f'</figcaption><img alt="{html.escape(f.title)}" src="data:image/png;base64,{b64}">'
            f'<p class="explain">{f.paragraph}</p></figure>'
        )
    meta = " · ".join(x for x in (html.escape(subtitle), f"privtab {__version__}", note) if x)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f'<p class="meta">{meta}</p>'
        + "".join(sections)
        + ("<h2>Figures</h2>" + "".join(fig_html) if fig_html else "")
        + "</body></html>\n"
    )


def write_html(path: str | Path, text: str) -> Path:
    """Write a report atomically, readable by all (0644: a report is a published file)."""
    from privtab.atomic import atomic_write

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(p, text)
