"""A griffe extension for the documentation site (mkdocs.yml): Sphinx roles as code.

privtab's docstrings use Sphinx roles (``:class:`Release```, ``:func:`~a.b.c```) and the
reST ``::`` that introduces a literal block. mkdocstrings renders Markdown, where a role
would show as ``:class:`` followed by code; this extension rewrites each role to a plain
code span (``~a.b.c`` → ``c``, as Sphinx shows it) and a paragraph's final ``::`` to ``:``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|obj|exc|const|ref|term):`([^`]+)`")
_LITERAL_INTRO = re.compile(r"(?<=\S)::$", re.M)


def markdown_docstring(text: str) -> str:
    """The docstring ``text`` with Sphinx roles as code spans and ``::`` intros as ``:``."""

    def code(match: re.Match[str]) -> str:
        target = match.group(1)
        if target.startswith("~"):
            target = target[1:].rsplit(".", 1)[-1]
        return f"`{target}`"

    return _LITERAL_INTRO.sub(":", _ROLE.sub(code, text))


class SphinxRoles(griffe.Extension):
    """Rewrite each object's docstring with :func:`markdown_docstring` as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
