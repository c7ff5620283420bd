"""``privtab topdown accuracy``: a TopDown release against its synthetic (public) truth.

The computation is :func:`privtab.topdown.accuracy.accuracy`; this command parses, calls
and prints (tables, or one JSON object with ``--json``).
"""

from __future__ import annotations

from pathlib import Path

import typer

from privtab.cli._render import JsonOption, QuietOption, emit
from privtab.errors import UsageError


def accuracy(
    release: Path = typer.Option(..., "--release", help="A TopDown release folder."),  # noqa: B008
    truth: Path = typer.Option(  # noqa: B008
        ..., "--truth", help="The (synthetic, non-confidential) data folder it was made from."
    ),
    html: Path | None = typer.Option(  # noqa: B008
        None, "--html", help="Also write the tables as an HTML report (not inside the release)."
    ),
    quiet: QuietOption = False,
    as_json: JsonOption = False,
) -> None:
    """Errors of a release by geolevel, table and size; the Census reliability criterion.

    Compares with the true tables: for synthetic or public data only.
    Example: privtab topdown accuracy --release release-de --truth synth-de
    """
    from privtab.cli._render import info
    from privtab.topdown.accuracy import accuracy as compute

    say = None if quiet or as_json else info
    if html is not None and html.resolve().is_relative_to(release.resolve()):
        raise UsageError(
            f"--html {html} lies inside the release {release}: a comparison with the truth "
            "is never part of a release",
            hint="write the report outside the release folder",
        )
    result = compute(release, truth, say=say)
    payload = result.to_json()
    if html is not None:
        from privtab.report import write_html

        payload["html"] = str(write_html(html, result.html()))
    lines = ["compared with the true tables: for synthetic or public data only"]
    if not result.private:
        lines.append("the release is a test release (seeded or noise off), not private")
    emit(payload, as_json, result.tables(), lines=lines)
