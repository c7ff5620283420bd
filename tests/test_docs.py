"""The documentation runs: every code block of README.md and docs/*.md (issue 19, deliver 4).

Each page is executed in a fresh interpreter, in a temporary folder, block by block in the
order of the page:

- a ```` ```python ```` block is executed (all python blocks of a page share one namespace,
  as a reader typing them into one session would);
- a ```` ```console ```` block holds shell commands after a ``$`` prompt, each followed by
  the output it shows; the command runs (``bash -c``, with ``COLUMNS=80``, the venv's
  ``privtab`` first on ``PATH`` and the release ledger inside the temporary folder), must
  exit 0 — or with the status a ``# exit N`` comment at the end of the command line states
  — and every output line the page shows must appear in what it printed, compared with
  spaces and table borders taken out (column widths change from run to run), and **its
  numbers must be the numbers printed there**: exactly, or — a number written ``~N``
  ("about N": a count that depends on the noise) — within 10 % + 2 of N (issue 31: the
  walk-through said "444,192 T1 rows, 18 T2 rows" when the run printed 9,124 and 20, and
  the old comparison took numbers out). A line ``...`` in the shown output stands for
  lines left out;
- in a python block, a ``print(...)`` line with a comment (``print(r)   # <privtab
  Release …>``) states what it prints: the comment (the parts between ``...``) must be in
  what the block printed, numbers compared as above;
- a ```` ```bash ```` or ```` ```sh ```` block is run as a script and must exit 0;
- a block preceded by ``<!-- not-run: REASON -->`` is not run; the reason must be given,
  and shows in the page's source;
- a block preceded by ``<!-- shown-in: FILE -->`` quotes FILE (a report the page's commands
  wrote): each of its lines must be in FILE (tags taken out, compared as above, numbers
  included);
- a sentence "```make X``` (run by ```make Y```)" must be true of the Makefile;
- other blocks (``text``, ``json``, none) are shown output, not code — except the command
  lists (blocks without a language whose lines start with ``privtab``): every such line
  runs in the slow suite and must exit 0, but for syntax summaries with placeholders,
  benchmarks, Spark, ``demo`` and 10⁷+ persons (each skipped with its reason); synthetic
  populations are made with 1,000 persons in DE and PR instead.

The three getting-started pages are one story — the office makes a release, the policy
maker reads its report, the data user uses its numbers — and run in one folder, in that
order. ``docs/python.md`` also has its own test, which checks what it prints
(``tests/safetab/test_docs.py``); it runs here like every other page.

An example that rots (a renamed function, a changed option, a different message) fails.
"""

from __future__ import annotations

import html
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ("run-a-release.md", "read-the-report.md", "use-the-numbers.md")
RUN = ("python", "console", "bash", "sh")
_FENCE = re.compile(r"^(`{3,})([\w+-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)
_NOT_RUN = re.compile(r"<!--\s*not-run:(.*?)-->\s*$", re.S)
_SHOWN_IN = re.compile(r"<!--\s*shown-in:\s*(\S+)\s*-->\s*$")
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*(?:e[-+]?\d+)?|\.\d+)", re.I)
_NOISE = re.compile(r"[\s\u2500-\u257f]+")


def blocks(page: Path) -> list[dict[str, Any]]:
    """The fenced blocks of ``page`` in order: language, code, line, not-run reason."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip()
        skip = _NOT_RUN.search(before[-400:])
        shown_in = _SHOWN_IN.search(before[-400:])
        found.append(
            {
                "lang": m.group(2).lower(),
                "code": m.group(3),
                "line": text.count("\n", 0, m.start()) + 1,
                "not_run": skip.group(1).strip() if skip else None,
                "shown_in": shown_in.group(1) if shown_in else None,
            }
        )
    return found


def steps(page: Path) -> list[dict[str, Any]]:
    """The blocks of ``page`` that run, with the page's name for messages."""
    name = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name
    return [
        {**b, "page": name}
        for b in blocks(page)
        if (b["lang"] in RUN or b["shown_in"]) and b["not_run"] is None
    ]


def normalise(text: str) -> str:
    """Text with numbers as ``#`` and spaces and box-drawing characters taken out."""
    return _NOISE.sub("", _NUMBER.sub("#", text))


_APPROX = "~"
Token = tuple[str, str]  # ("#", number text) or (character, "")


def tokens(text: str, *, shown: bool = False) -> list[Token]:
    """``text`` as characters and numbers, spaces and table borders taken out; in shown
    output (``shown``) a number written ``~N`` is the token ``("~", "N")``."""
    out: list[Token] = []
    pos = 0
    for m in _NUMBER.finditer(text):
        before = text[pos : m.start()]
        approx = shown and before.endswith(_APPROX)
        if approx:
            before = before[: -len(_APPROX)]
        out += [(c, "") for c in _NOISE.sub("", before)]
        out.append(("~" if approx else "#", m.group()))
        pos = m.end()
    out += [(c, "") for c in _NOISE.sub("", text[pos:])]
    return out


def _value(number: str) -> float:
    return float(number.replace(",", ""))


def _same_number(shown: Token, printed: Token) -> bool:
    want, got = _value(shown[1]), _value(printed[1])
    if shown[0] == "~":
        return abs(want - got) <= 0.1 * abs(want) + 2
    return want == got


def find_shown(line: str, printed: str) -> str | None:
    """``None`` when the shown ``line`` is in ``printed`` — words in order and every
    number the number printed at its place (``~N``: about N, see the module docstring);
    else what differs (the closest place where the words match, with its numbers)."""
    want = tokens(line, shown=True)
    got = tokens(printed)
    if not want:
        return None
    kinds = [w[0] if w[0] not in ("#", "~") else "#" for w in want]
    near: str | None = None
    for i in range(len(got) - len(want) + 1):
        window = got[i : i + len(want)]
        if [g[0] for g in window] != kinds:
            continue
        bad = [
            (w, g)
            for w, g in zip(want, window, strict=True)
            if w[0] in ("#", "~") and not _same_number(w, g)
        ]
        if not bad:
            return None
        near = near or ", ".join(
            f"{'~' if w[0] == '~' else ''}{w[1]} shown, {g[1]} printed" for w, g in bad
        )
    return near if near is not None else "its words are not in the output"


def console_commands(code: str) -> list[tuple[str, list[str]]]:
    """``$ command`` lines (a trailing ``\\`` continues one) and the output each shows."""
    commands: list[tuple[str, list[str]]] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith("$ "):
            if commands:
                commands[-1][1].append(line)
            continue
        command = line[2:]
        while command.endswith("\\") and i < len(lines):
            command = command[:-1] + " " + lines[i].strip()
            i += 1
        commands.append((command, []))
    return commands


def pages() -> list[Path]:
    """README.md and every page of docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


# pages whose blocks another test runs (and checks more closely); not run twice
ELSEWHERE = {"docs/python.md": "tests/safetab/test_docs.py runs it and checks what it prints"}


def run_pages(names: list[Path], folder: Path) -> subprocess.CompletedProcess[str]:
    """Run the blocks of ``names`` in order, in a fresh interpreter in ``folder``."""
    plan = folder / ".docs-plan.json"
    plan.write_text(json.dumps([s for p in names for s in steps(p)]), encoding="utf-8")
    return subprocess.run(
        # -P: this folder (tests/, whose packages shadow the stdlib's random) not on sys.path
        [sys.executable, "-P", str(Path(__file__).resolve()), str(plan)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


SINGLE = [
    p
    for p in pages()
    if steps(p) and p.name not in GUIDE and str(p.relative_to(ROOT)) not in ELSEWHERE
]


@pytest.mark.parametrize("page", SINGLE, ids=[p.name for p in SINGLE])
def test_page_runs(page: Path, tmp_path: Path) -> None:
    done = run_pages([page], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_getting_started_pages_run_as_one_story(tmp_path: Path) -> None:
    # the office's release (run-a-release) is the one the policy maker and the data user read
    done = run_pages([ROOT / "docs" / name for name in GUIDE], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


# the command lists of the pages (blocks without a language, lines starting with `privtab `):
# each line runs in the slow suite, in order, except those that cannot run as written
_LIST_SKIP = (
    (
        re.compile(r"\[|\s\|\s|\b(DIR2?|FILE|ID|KEY|OUT|PATH)\b|my[-_]|curve\.csv|out/|\\$"),
        "a syntax summary with placeholders",
    ),
    (re.compile(r"^privtab bench "), "a benchmark: minutes, and peer libraries (make bench)"),
    (re.compile(r"--engine spark"), "needs Java 17 and Spark (make test-extras runs the engine)"),
    (re.compile(r"^privtab demo"), "make demo runs it"),
    (re.compile(r"--persons \d{8,}|synth-(1e[78]|3\.31e8)"), "10^7+ persons (docs/benchmarks.md)"),
)
# synthetic populations in the lists are made smaller (same commands, a small domain)
_SMALL = (re.compile(r"--persons \d+"), "--persons 1000 --states DE,PR")


def command_list(page: Path) -> tuple[list[str], dict[str, str]]:
    """The runnable lines of ``page``'s command lists, and the skipped ones with reasons."""
    run: list[str] = []
    skipped: dict[str, str] = {}
    for b in blocks(page):
        if b["lang"] or b["not_run"] is not None:
            continue
        for line in b["code"].splitlines():
            if not line.startswith("privtab "):
                continue
            command = re.sub(r"\s+#.*$", "", line).strip()
            why = next((r for pattern, r in _LIST_SKIP if pattern.search(command)), None)
            if why:
                skipped[command] = why
            elif "--states" not in command:
                run.append(_SMALL[0].sub(_SMALL[1], command))
            else:
                run.append(_SMALL[0].sub("--persons 1000", command))
    return run, skipped


LISTS = [p for p in pages() if command_list(p)[0]]


@pytest.mark.slow
@pytest.mark.parametrize("page", LISTS, ids=[p.name for p in LISTS])
def test_command_lists_run(page: Path, tmp_path: Path) -> None:
    run, _ = command_list(page)
    from privtab.data import production_config_dir

    # `--config params/` in the lists is the reader's own config folder: the production one
    shutil.copytree(production_config_dir(), tmp_path / "params")
    step = {"lang": "console", "line": 0, "page": page.name, "not_run": None, "shown_in": None}
    plan = tmp_path / ".docs-plan.json"
    plan.write_text(json.dumps([{**step, "code": "".join(f"$ {c}\n" for c in run)}]))
    done = subprocess.run(
        [sys.executable, "-P", str(Path(__file__).resolve()), str(plan)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_api_reference_documents_exactly_the_public_names() -> None:
    # docs/reference/<subpackage>.md lists its members (mkdocstrings) = the __all__ list;
    # a name whose module has the same name is documented from its module
    pages = sorted((ROOT / "docs" / "reference").glob("*.md"))
    documented = {p.stem for p in pages}
    public = {
        name
        for name in importlib.import_module("privtab").SUBPACKAGES
        if importlib.import_module(f"privtab.{name}").__all__
    }
    assert documented == public
    for page in pages:
        text = page.read_text(encoding="utf-8")
        names = re.findall(r"^ {8}- (\w+)$", text, re.M)
        names += re.findall(rf"^::: privtab\.{page.stem}\.\w+\.(\w+)$", text, re.M)
        assert sorted(names) == sorted(importlib.import_module(f"privtab.{page.stem}").__all__)


def test_every_code_block_runs_or_says_why_not() -> None:
    run = 0
    for page in pages():
        for b in blocks(page):
            where = f"{page.name}:{b['line']}"
            if b["not_run"] is not None:
                assert b["not_run"], f"{where}: not-run without a reason"
            elif b["lang"] in RUN:
                run += 1
            assert b["lang"] != "pycon", f"{where}: write python blocks (they run)"
    for name in GUIDE:
        assert steps(ROOT / "docs" / name), f"{name} has no example that runs"
    assert run >= 30, run


_MAKE_CLAIM = re.compile(r"`make ([\w-]+)` \(run by `make ([\w-]+)`\)")


def _make_runs(target: str) -> set[str]:
    """The targets ``make target`` runs: its prerequisites and ``$(MAKE) x`` lines, and
    theirs."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    rules = {
        m.group(1): m.group(2) + "\n" + m.group(3)
        for m in re.finditer(r"^([\w-]+):([^\n]*)\n((?:\t[^\n]*\n)*)", text, re.M)
    }
    seen: set[str] = set()
    todo = [target]
    while todo:
        t = todo.pop()
        body = rules.get(t, "")
        for dep in re.findall(r"(?:^|\s)([\w-]+)(?=\s|$)", body.split("\n")[0]) + re.findall(
            r"\$\(MAKE\)\s+([\w-]+)", body
        ):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_what_the_docs_say_make_runs_is_what_it_runs() -> None:
    """Issue 31: docs/cli.md said ``make test-extras`` is run by ``make test``; it is not."""
    claims = [
        (page.name, a, b)
        for page in pages()
        for a, b in _MAKE_CLAIM.findall(page.read_text(encoding="utf-8"))
    ]
    for page, a, b in claims:
        assert a in _make_runs(b), f"{page}: `make {a}` is not run by `make {b}`"
    assert "lint" in _make_runs("test")
    assert "test-extras" not in _make_runs("test")


def test_stated_numbers_must_be_the_printed_ones() -> None:
    printed = "release written to r (private): 9,124 T1 rows, 20 T2 rows\n│ ρ-zCDP │ 4.785 │"
    assert (
        find_shown("release written to r (private): ~9,100 T1 rows, ~20 T2 rows", printed) is None
    )
    assert find_shown("│ ρ-zCDP   │   4.785 │", printed) is None
    why = find_shown("release written to r (private): 444,192 T1 rows, 18 T2 rows", printed)
    assert why is not None
    assert "444,192 shown, 9,124 printed" in why
    assert find_shown("│ ρ-zCDP │ 4.78501 │", printed) is not None
    assert find_shown("rows written", printed) == "its words are not in the output"
    assert printed_claims("x = 1\nprint(r)   # <a 1 ... b 2>\n#  more 3\n") == [
        "a 1",
        "b 2> more 3",
    ]


def test_a_rotten_example_fails(tmp_path: Path) -> None:
    page = tmp_path / "rotten.md"
    ok = "```console\n$ echo 'noisy count 1,234 of 5 levels'\nnoisy count ~1,200 of 5 levels\n```\n"
    page.write_text("```python\nx = 1\nprint(x + 1)  # 2\n```\n" + ok, encoding="utf-8")
    assert run_pages([page], tmp_path).returncode == 0  # the numbers it prints (or about)
    for rot in (
        ok.replace("of 5 levels\n```", "of 7 levels\n```"),  # a stated number drifted
        "```python\nprint(1 + 1)  # 3\n```\n",  # a print that says what it does not print
        "```python\nfrom privtab.accounting import no_such_name\n```\n",
        ok.replace("noisy count ~1,200", "noisy total ~1,200"),  # a changed word
        "```console\n$ ls no-such-file\n```\n",  # a failing command
        "```console\n$ true  # exit 2\n```\n",  # not the stated exit status
        "```bash\nfalse\n```\n",
    ):
        page.write_text(rot, encoding="utf-8")
        done = run_pages([page], tmp_path)
        assert done.returncode == 1, rot
        assert "rotten.md, block at line 1" in done.stdout
    (tmp_path / "report.html").write_text("<p>It satisfies <b>ρ = 4.785</b> zCDP</p>")
    quote = "<!-- shown-in: report.html -->\n```text\nIt satisfies ρ = 4.785 zCDP\n```\n"
    page.write_text(quote, encoding="utf-8")
    assert run_pages([page], tmp_path).returncode == 0  # the report says it
    page.write_text(quote.replace("zCDP", "pure DP"), encoding="utf-8")
    assert run_pages([page], tmp_path).returncode == 1  # the report does not say it
    page.write_text(quote.replace("4.785", "4.78501"), encoding="utf-8")
    assert run_pages([page], tmp_path).returncode == 1  # nor with that number
    page.write_text("<!-- not-run: shown only -->\n```bash\nfalse\n```\n", encoding="utf-8")
    assert run_pages([page], tmp_path).returncode == 0


# ---------------------------------------------------------------- inside the fresh interpreter


def _fail(step: dict[str, Any], what: str) -> None:
    print(f"{step['page']}, block at line {step['line']} ({step['lang']}): {what}")
    raise SystemExit(1)


def _run_console(step: dict[str, Any], env: dict[str, str]) -> None:
    for command, shown in console_commands(step["code"]):
        want = _EXIT.search(command)
        status = int(want.group(1)) if want else 0
        done = subprocess.run(
            ["bash", "-c", command],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        printed = done.stdout + done.stderr
        if done.returncode != status:
            _fail(step, f"`{command}` exited {done.returncode}, not {status}:\n{printed}")
        for line in shown:
            if line.strip() in ("", "...", "…"):
                continue
            why = find_shown(line, printed)
            if why is not None:
                _fail(
                    step,
                    f"`{command}` did not print the line\n  {line}\n({why}). It printed:\n"
                    f"{printed}",
                )


def _check_shown(step: dict[str, Any]) -> None:
    shown = Path(step["shown_in"])
    if not shown.is_file():
        _fail(step, f"{shown} does not exist")
    text = html.unescape(re.sub(r"<[^>]+>", " ", shown.read_text(encoding="utf-8")))
    for line in step["code"].splitlines():
        if line.strip() in ("", "...", "…"):
            continue
        why = find_shown(line, text)
        if why is not None:
            _fail(step, f"{shown} does not say\n  {line}\n({why})")


_PRINTED = re.compile(r"^\s*print\(.*\)\s*#\s?(.*)$")


def printed_claims(code: str) -> list[str]:
    """What the ``print(...)  # …`` lines of a python block say they print: the parts of
    each comment between ``...`` (a comment continued on the next comment-only lines)."""
    claims: list[str] = []
    lines = code.splitlines()
    for i, line in enumerate(lines):
        m = _PRINTED.match(line)
        if not m:
            continue
        text = m.group(1)
        for more in lines[i + 1 :]:
            cont = re.match(r"^\s*#\s+(.*)$", more)
            if not cont:
                break
            text += " " + cont.group(1)
        claims += [p.strip(" <>") for p in re.split(r"\.\.\.|…", text) if p.strip(" <>,")]
    return claims


def _run_python(step: dict[str, Any], namespace: dict[str, Any]) -> None:
    import contextlib
    import io

    buffer = io.StringIO()
    try:
        code = compile(step["code"], f"{step['page']}:{step['line']}", "exec")
        with contextlib.redirect_stdout(buffer):
            exec(code, namespace)
    except Exception:
        sys.stdout.write(buffer.getvalue())
        _fail(step, "raised\n" + traceback.format_exc())
    printed = buffer.getvalue()
    sys.stdout.write(printed)
    for claim in printed_claims(step["code"]):
        why = find_shown(claim, printed)
        if why is not None:
            _fail(step, f"did not print\n  {claim}\n({why}). It printed:\n{printed}")


def _run_page(plan: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # the release ledger of private releases made by the examples stays in the folder
    env.update(
        COLUMNS="80", NO_COLOR="1", TERM="dumb", PRIVTAB_LEDGER=str(Path.cwd() / "ledger.json")
    )
    os.environ.update(PRIVTAB_LEDGER=env["PRIVTAB_LEDGER"], COLUMNS="80")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for step in json.loads(plan.read_text(encoding="utf-8")):
        if step["lang"] == "python":
            _run_python(step, namespace)
        elif step["shown_in"]:
            _check_shown(step)
        elif step["lang"] == "console":
            _run_console(step, env)
        else:
            done = subprocess.run(
                ["bash", "-e", "-c", step["code"]],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if done.returncode != 0:
                _fail(step, f"exited {done.returncode}:\n{done.stdout}{done.stderr}")


if __name__ == "__main__":
    _run_page(Path(sys.argv[1]))
