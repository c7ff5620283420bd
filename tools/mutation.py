"""Mutation check: does the test suite catch realistic privacy bugs? (``make mutation``)

Each mutant below is a small textual patch that plants one privacy bug — noise with
truncated tails, a predictable random stream, a stage of the plan that overspends, a
stability one too small, … — into a scratch copy of the checkout. The tests relevant to it
are run against the mutated copy; the mutant is *killed* if they fail (or time out) and
*survives* if they pass. The script prints a table mutant → killed/survived and exits

* 0 when every mutant is killed;
* 1 when one survives (the suite has a gap: add a test that fails on it);
* 2 when a mutant cannot be applied (its snippet is gone or no longer unique: the code
  moved — update the snippet) or the unmutated copy fails its tests.

Patches match a short unique snippet anywhere in the file (robust to code motion) and fail
loudly when it is missing or ambiguous. The working tree is never modified: the checkout's
tracked and untracked, non-ignored files are copied to a temporary directory, and the tests
import privtab from there (``PYTHONPATH``).

Usage: ``python tools/mutation.py [--only NAME ...] [--list] [--keep]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 900  # seconds per mutant; a hang counts as killed


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str
    path: str
    edits: tuple[tuple[str, str], ...]  # (unique snippet, replacement)
    tests: tuple[str, ...]


SAMPLER_TESTS = (
    "tests/random/test_privacy_mutants.py",
    "tests/random/test_gaussian_table.py",
    "tests/random/test_exact_paths.py",
    "tests/random/test_samplers_statistical.py",
)
SOURCE_TESTS = ("tests/random/test_privacy_mutants.py", "tests/random/test_sources.py")

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "dg-tails-6sigma",
        "discrete Gaussian tails truncated at 6σ (bounded support: zCDP fails)",
        "src/privtab/random/gaussian_sampler.py",
        (
            (
                "kept = y[accept]",
                "kept = y[accept & (np.abs(y) <= 6 * math.sqrt(float(spec.sigma2)))]",
            ),
        ),
        SAMPLER_TESTS,
    ),
    Mutant(
        "dg-slow-path-accepts",
        "discrete Gaussian: the exact slow path always accepts",
        "src/privtab/random/gaussian_sampler.py",
        (
            (
                "accept[i] = resolve_less(LazyUniform(int(v[i]), 63), enclosure, src)",
                "accept[i] = True",
            ),
        ),
        SAMPLER_TESTS,
    ),
    Mutant(
        "dg-table-tail-cut",
        "discrete Gaussian table method: no draw beyond the table's last entry (bounded support)",
        "src/privtab/random/gaussian_table.py",
        (
            (
                "mag[i] = resolve_magnitude(table, int(v[i]), int(idx[i]), src)",
                "mag[i] = min(int(idx[i]), table.size - 1)",
            ),
        ),
        SAMPLER_TESTS,
    ),
    Mutant(
        "dg-table-guide-boundary",
        "discrete Gaussian table method: a guide bucket holding a CDF boundary counted clean",
        "src/privtab/random/gaussian_table.py",
        (
            (
                "(lo[np.minimum(first, lo.size - 1)] >= ends)",
                "(lo[np.minimum(first, lo.size - 1)] >= starts)",
            ),
        ),
        SAMPLER_TESTS,
    ),
    Mutant(
        "dlap-slow-floor-off-by-one",
        "discrete Laplace: the exact slow path's floor is off by one",
        "src/privtab/random/laplace_sampler.py",
        (
            (
                "out[i] = resolve_floor(LazyUniform(int(v[i]), 63), spec.y_range, src)",
                "out[i] = resolve_floor(LazyUniform(int(v[i]), 63), spec.y_range, src) + 1",
            ),
        ),
        SAMPLER_TESTS,
    ),
    Mutant(
        "aes-fixed-key",
        "secure source: a fixed AES key with a random counter (a predictable stream)",
        "src/privtab/random/sources.py",
        (
            (
                "_AESCounterStream(os.urandom(32), os.urandom(16))",
                "_AESCounterStream(bytes(32), os.urandom(16))",
            ),
        ),
        SOURCE_TESTS,
    ),
    Mutant(
        "secure-env-seed-fallback",
        "secure source: falls back to a seeded generator when an environment variable is set",
        "src/privtab/random/sources.py",
        (
            (
                "        self._stream = _AESCounterStream(os.urandom(32), os.urandom(16))\n",
                "        self._stream = (\n"
                '            SeededSource(os.environ["PRIVTAB_SEED"])._stream\n'
                '            if "PRIVTAB_SEED" in os.environ\n'
                "            else _AESCounterStream(os.urandom(32), os.urandom(16))\n"
                "        )\n",
            ),
        ),
        SOURCE_TESTS,
    ),
    Mutant(
        "fork-key-reuse",
        "secure source: a forked child keeps its parent's key and stream position",
        "src/privtab/random/sources.py",
        (
            ("            or self._pid != os.getpid()\n", ""),
            (
                "                self._rekey()\n                self._buffer = np.empty(",
                "                self._pid = os.getpid()\n                self._buffer = np.empty(",
            ),
        ),
        SOURCE_TESTS,
    ),
    Mutant(
        "dg-variance-1pct",
        "discrete Gaussian noise variance 1% too small",
        "src/privtab/random/gaussian_sampler.py",
        (("    return s2\n", "    return s2 * Fraction(99, 100)\n"),),
        ("tests/random/test_privacy_mutants.py", "tests/mechanisms/test_mechanisms_api.py"),
    ),
    Mutant(
        "geometric-scale-1pct",
        "geometric (discrete Laplace) noise scale 1% too small",
        "src/privtab/random/laplace_sampler.py",
        (("    return t\n", "    return t * Fraction(99, 100)\n"),),
        ("tests/random/test_privacy_mutants.py", "tests/mechanisms/test_mechanisms_api.py"),
    ),
    Mutant(
        "stage1-share",
        "plan: stage 1 gets 2γ·b/s instead of γ·b/s (the level overspends)",
        "src/privtab/tabulate/plan.py",
        (
            (
                'StagePlan.build("stage1", privacy_defn, gamma * per_group)',
                'StagePlan.build("stage1", privacy_defn, 2 * gamma * per_group)',
            ),
        ),
        ("tests/tabulate/test_plan_shares.py", "tests/tabulate/test_plan_privacy.py"),
    ),
    Mutant(
        "failed-run-keeps-reservation",
        "ledger: a run that fails before publication no longer cancels its pending reservation",
        "src/privtab/publish/run.py",
        (
            (
                "withdraw(ctx, guard)  # refused, failed or interrupted",
                "pass  # the reservation stays pending",
            ),
        ),
        ("tests/tabulate/test_release_ledger.py", "tests/safetab_h/test_ledger.py"),
    ),
    Mutant(
        "h-records-not-identified",
        "ledger: SafeTab-H's households digest is not added to its reservation (a re-sorted "
        "or re-encoded copy of the same households becomes a new data set)",
        "src/privtab/safetab_h/run.py",
        (
            (
                "identify_release(ctx, None if records is None else records.key)",
                "identify_release(ctx, None)",
            ),
        ),
        ("tests/safetab_h/test_ledger.py",),
    ),
    Mutant(
        "h-own-data-set",
        "ledger: SafeTab-H ignores the data set of the SafeTab-P release whose T1 it reads "
        "(DHC-A and DHC-B of one population are two data sets: rho_P + 2 rho_H per person "
        "is never composed)",
        "src/privtab/safetab_h/run.py",
        (
            (
                "dataset = dataset_of_folder(ctx.opts.ledger, ctx.t1_release)",
                "dataset = None",
            ),
        ),
        ("tests/safetab_h/test_cli.py",),
    ),
    Mutant(
        "td-slice-seed-reuse",
        "TopDown: every slice task of a level derives the same test source (the slices' "
        "noise repeats: a reused key)",
        "src/privtab/topdown/measure.py",
        (
            (
                'seed: str | None = f"{text}-{self.key}-{level}-{units.start}"',
                'seed: str | None = f"{text}-{self.key}-{level}-0"',
            ),
        ),
        ("tests/topdown/test_measure.py",),
    ),
    Mutant(
        "td-secure-task-seeded",
        "TopDown: a secure run's slice tasks draw from a fixed seed instead of their "
        "process's secure source",
        "src/privtab/topdown/measure.py",
        (
            (
                "        elif self._source.is_private or not self.noise:\n            seed = None",
                '        elif self._source.is_private or not self.noise:\n            seed = "0"',
            ),
        ),
        ("tests/topdown/test_measure.py",),
    ),
    Mutant(
        "stability-minus-one",
        "a level's stability one too small (every group overspends)",
        "src/privtab/data/stability.py",
        (
            (
                "return self.census_rule if self.census_rule >= self.exact else self.exact",
                "return (self.census_rule if self.census_rule >= self.exact else self.exact) - 1",
            ),
        ),
        ("tests/data/test_stability.py",),
    ),
)


class MutantError(Exception):
    """A mutant cannot be applied (its snippet is missing or not unique)."""


def apply(text: str, mutant: Mutant) -> str:
    """``text`` with every edit of ``mutant`` applied; each snippet must occur exactly once."""
    for snippet, replacement in mutant.edits:
        n = text.count(snippet)
        if n != 1:
            where = "is gone" if n == 0 else f"occurs {n} times"
            raise MutantError(
                f"{mutant.name}: the snippet {snippet!r} {where} in {mutant.path}; "
                "the code moved — update the mutant in tools/mutation.py"
            )
        text = text.replace(snippet, replacement)
    return text


def copy_checkout(dest: Path) -> None:
    """Copy the checkout's tracked and untracked, non-ignored files to ``dest``."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = Path(os.fsdecode(raw))
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the working tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def run_tests(scratch: Path, tests: tuple[str, ...]) -> tuple[bool, str, float]:
    """Run ``tests`` in ``scratch``; returns (passed, first failure or note, seconds)."""
    env = dict(os.environ, PYTHONPATH=str(scratch / "src"), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PRIVTAB_SLOW", None)
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-n", "0"]
    start = time.monotonic()
    try:
        res = subprocess.run(
            [*cmd, *tests],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {TIMEOUT} s", time.monotonic() - start
    took = time.monotonic() - start
    failed = [ln for ln in res.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    note = failed[0] if failed else (res.stdout.strip().splitlines() or ["?"])[-1]
    return res.returncode == 0, note, took


def check_import(scratch: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(scratch / "src"))
    out = subprocess.run(
        [sys.executable, "-c", "import privtab; print(privtab.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(out).resolve().is_relative_to(scratch.resolve()):
        raise MutantError(f"the scratch copy is not the privtab imported by the tests ({out})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = ap.parse_args(argv)
    mutants = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.only and len(mutants) != len(set(args.only)):
        known = ", ".join(m.name for m in MUTANTS)
        print(f"mutation: unknown mutant in {args.only}; known: {known}", file=sys.stderr)
        return 2
    if args.list:
        for m in mutants:
            print(f"{m.name:28} {m.path}\n{'':28} {m.bug}")
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="privtab-mutation-"))
    try:
        copy_checkout(scratch)
        check_import(scratch)
        originals = {m.path: (scratch / m.path).read_text() for m in mutants}
        patched = {m.name: apply(originals[m.path], m) for m in mutants}  # fail before running
        all_tests = tuple(dict.fromkeys(t for m in mutants for t in m.tests))
        ok, note, took = run_tests(scratch, all_tests)
        print(f"baseline (no mutant): {'pass' if ok else 'FAIL'} in {took:.0f} s", flush=True)
        if not ok:
            print(f"mutation: the unmutated copy fails its tests: {note}", file=sys.stderr)
            return 2
        rows = []
        for m in mutants:
            target = scratch / m.path
            target.write_text(patched[m.name])
            try:
                passed, note, took = run_tests(scratch, m.tests)
            finally:
                target.write_text(originals[m.path])
            verdict = "SURVIVED" if passed else "killed"
            rows.append((m, verdict, note, took))
            print(f"  {m.name:28} {verdict:8} {took:5.0f} s  {note}", flush=True)
    except MutantError as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.keep:
            print(f"scratch copy kept at {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(f"{'mutant':28} {'result':8} bug")
    for m, verdict, _, _ in rows:
        print(f"{m.name:28} {verdict:8} {m.bug}")
    survived = [m.name for m, v, _, _ in rows if v == "SURVIVED"]
    print(f"\n{len(rows) - len(survived)} of {len(rows)} mutants killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
