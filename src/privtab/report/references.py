"""The works privtab's reports cite, as full references, and how a report cites them.

A report cites with :meth:`Citations.cite` — ``Kifer et al. 2022, §6.1`` linked to the
entry — and ends with :meth:`Citations.html`, the list of every work it cited (authors,
title, venue, year), alphabetical. The seeds in ``/work/shared/seeds`` are the first five
entries of :data:`REFERENCES`; their bibliographic data is taken from the papers
themselves (author lists, the venue of the published version).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

__all__ = ["REFERENCES", "SEED_FILES", "Citations", "Reference"]


@dataclass(frozen=True)
class Reference:
    """One work: ``authors`` as printed (full names, comma-separated), its title, where it
    appeared, the year and an optional public address."""

    authors: tuple[str, ...]
    title: str
    venue: str
    year: int
    url: str = ""

    @property
    def short(self) -> str:
        """Author–year form: ``Wasserman & Zhou 2010``, ``Kifer et al. 2022``."""
        last = [a.split()[-1] for a in self.authors]
        if len(last) == 1:
            who = last[0]
        elif len(last) == 2:
            who = f"{last[0]} & {last[1]}"
        else:
            who = f"{last[0]} et al."
        return f"{who} {self.year}"

    def entry_html(self) -> str:
        """The full reference as HTML (authors. title. venue, year. address)."""
        authors = ", ".join(self.authors)
        link = f' <a href="{html.escape(self.url)}">{html.escape(self.url)}</a>' if self.url else ""
        return (
            f"{html.escape(authors)}. <em>{html.escape(self.title)}</em>. "
            f"{html.escape(self.venue)}, {self.year}.{link}"
        )


REFERENCES: dict[str, Reference] = {
    # the seeds
    "safetab": Reference(
        (
            "Sam Haney",
            "William Sexton",
            "Ashwin Machanavajjhala",
            "Michael Hay",
            "Gerome Miklau",
        ),
        "Differentially Private Algorithms for 2020 Census Detailed DHC Race & Ethnicity",
        "Tumult Labs technical report, arXiv:2107.10659",
        2021,
        "https://arxiv.org/abs/2107.10659",
    ),
    "semantics": Reference(
        (
            "Daniel Kifer",
            "John M. Abowd",
            "Robert Ashmead",
            "Ryan Cumings-Menon",
            "Philip Leclerc",
            "Ashwin Machanavajjhala",
            "William Sexton",
            "Pavel Zhuravlev",
        ),
        "Bayesian and Frequentist Semantics for Common Variations of Differential Privacy: "
        "Applications to the 2020 Census",
        "arXiv:2209.03310",
        2022,
        "https://arxiv.org/abs/2209.03310",
    ),
    "inferential": Reference(
        ("James Bailie", "Ruobin Gong"),
        "General Inferential Limits Under Differential and Pufferfish Privacy",
        "International Journal of Approximate Reasoning 172, 109242",
        2024,
        "https://arxiv.org/abs/2401.15491",
    ),
    "course": Reference(
        ("Robert Ashmead", "Philip Leclerc", "William Sexton"),
        "An Introduction to Differential Privacy",
        "Short course, Joint Statistical Meetings, Denver",
        2019,
    ),
    # the works the seeds build on that the reports name
    "wasserman-zhou": Reference(
        ("Larry Wasserman", "Shuheng Zhou"),
        "A Statistical Framework for Differential Privacy",
        "Journal of the American Statistical Association 105(489), 375–389",
        2010,
    ),
    "kairouz": Reference(
        ("Peter Kairouz", "Sewoong Oh", "Pramod Viswanath"),
        "The Composition Theorem for Differential Privacy",
        "Proceedings of the 32nd International Conference on Machine Learning (ICML)",
        2015,
    ),
    "balle": Reference(
        ("Borja Balle", "Gilles Barthe", "Marco Gaboardi", "Justin Hsu", "Tetsuya Sato"),
        "Hypothesis Testing Interpretations and Rényi Differential Privacy",
        "Proceedings of the 23rd International Conference on Artificial Intelligence and "
        "Statistics (AISTATS)",
        2020,
    ),
    "cks": Reference(
        ("Clément L. Canonne", "Gautam Kamath", "Thomas Steinke"),
        "The Discrete Gaussian for Differential Privacy",
        "Advances in Neural Information Processing Systems 33 (NeurIPS)",
        2020,
    ),
    "bun-steinke": Reference(
        ("Mark Bun", "Thomas Steinke"),
        "Concentrated Differential Privacy: Simplifications, Extensions, and Lower Bounds",
        "Theory of Cryptography Conference (TCC)",
        2016,
    ),
    "dong-roth-su": Reference(
        ("Jinshuo Dong", "Aaron Roth", "Weijie J. Su"),
        "Gaussian Differential Privacy",
        "Journal of the Royal Statistical Society Series B 84(1), 3–37",
        2022,
    ),
    "mironov": Reference(
        ("Ilya Mironov",),
        "Rényi Differential Privacy",
        "IEEE 30th Computer Security Foundations Symposium (CSF)",
        2017,
    ),
    "doroshenko": Reference(
        (
            "Vadym Doroshenko",
            "Badih Ghazi",
            "Pritish Kamath",
            "Ravi Kumar",
            "Pasin Manurangsi",
        ),
        "Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions",
        "Proceedings on Privacy Enhancing Technologies 2022(4)",
        2022,
    ),
}


#: seed file name → its key in :data:`REFERENCES`
SEED_FILES: dict[str, str] = {
    "safetab-detailed-dhc-race-ethnicity.txt": "safetab",
    "semantics-of-dp-variants-2020-census.txt": "semantics",
    "inferential-limits-dp-pufferfish.txt": "inferential",
    "intro-to-dp-jsm2019-course.md": "course",
}


class Citations:
    """The citations of one report: :meth:`cite` in the text, :meth:`html` at the end."""

    def __init__(self) -> None:
        self._cited: set[str] = set()

    def cite(self, key: str, where: str = "") -> str:
        """``Kifer et al. 2022, §6.1`` as an HTML link to the reference list entry.

        ``where`` is the section, theorem or table, in the work's own numbering."""
        ref = REFERENCES[key]  # KeyError: an unknown work is a programming error
        self._cited.add(key)
        text = ref.short + (f", {where}" if where else "")
        return f'<a class="cite" href="#ref-{key}">{html.escape(text)}</a>'

    def text(self, key: str, where: str = "") -> str:
        """The same citation as plain text (figure captions in images, JSON)."""
        self._cited.add(key)
        return REFERENCES[key].short + (f", {where}" if where else "")

    def source(self, text: str) -> str:
        """A source string that starts with a seed's file name (``"<file>, Tables 3-5"``)
        as a citation; any other text escaped as it is."""
        for name, key in SEED_FILES.items():
            if text.startswith(name):
                return self.cite(key, text[len(name) :].lstrip(" ,;:"))
        return html.escape(text)

    @property
    def keys(self) -> list[str]:
        """The cited works, in the order of the list (alphabetical by short form)."""
        return sorted(self._cited, key=lambda k: REFERENCES[k].short)

    def html(self) -> str:
        """The ``References`` section (empty when nothing was cited)."""
        if not self._cited:
            return ""
        items = "".join(f'<li id="ref-{k}">{REFERENCES[k].entry_html()}</li>' for k in self.keys)
        return f'<h2 id="references">References</h2><ol class="references">{items}</ol>'
