"""Shared fixtures: recipe trees written by the tests, the real Megatron-LM
tree when `.ci/run` points MATRIXGEN_MEGATRON_RECIPES at it, and the Hypothesis
profiles.

Hypothesis profiles (docs/testing.md):
- ``ci``: derandomised (the same examples on every run), no example database,
  and a reproduction blob printed on failure. Selected when ``CI=true`` or
  ``MATRIXGEN_HYPOTHESIS_PROFILE=ci``: a CI run must be reproducible, and a
  failure must not be replayed from a database into every later run.
- ``explore`` (the default elsewhere): randomised, with the local example
  database, so that each local run tries new examples and replays failures.
  ``MATRIXGEN_HYPOTHESIS_PROFILE=explore`` selects it explicitly.

Tests that need the Megatron-LM tree (or its golden-values changes,
`MATRIXGEN_MEGATRON_GOLDENS`) skip when it is absent, or fail instead under
``MATRIXGEN_REQUIRE_MEGATRON=1`` (set by `.ci/run`), where a silently skipped
comparison would hide a missing tree.
"""

from __future__ import annotations

import datetime as dt
import os
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from matrixgen.cli.main import main
from tests import tiers

# The evidence tests' real pytest runs and results store (session fixtures).
pytest_plugins = ("tests.results_fixtures",)


# The tiers (tests/tiers.py): marked before `-m` deselects, and each test's
# slow resources checked against its mark while it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tiers.mark_tiers(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    tiers.enter(item)
    try:
        return (yield)
    finally:
        tiers.leave(item)


MEGATRON_ENV = "MATRIXGEN_MEGATRON_RECIPES"
REQUIRE_MEGATRON_ENV = "MATRIXGEN_REQUIRE_MEGATRON"
PROFILE_ENV = "MATRIXGEN_HYPOTHESIS_PROFILE"

# Both start from Hypothesis's own defaults (not from whatever profile it picked
# by itself on seeing CI=true). Neither has a deadline nor the too_slow health
# check: both measure wall time, which on a shared machine fails at random.
_BASE = settings.get_profile("default")
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile(
    "ci", parent=_BASE, derandomize=True, database=None, print_blob=True, **_UNTIMED
)
settings.register_profile("explore", parent=_BASE, derandomize=False, print_blob=True, **_UNTIMED)


def hypothesis_profile(environ: Mapping[str, str] = os.environ) -> str:
    """The profile a run uses: MATRIXGEN_HYPOTHESIS_PROFILE, else ``ci`` under
    CI=true, else ``explore``."""
    chosen = environ.get(PROFILE_ENV)
    if chosen:
        return chosen
    return "ci" if environ.get("CI", "").lower() == "true" else "explore"


settings.load_profile(hypothesis_profile())

# Every test names its recipe tree, or means the checkout's default: a tree the
# shell running the suite points at must not leak in.
os.environ.pop("MATRIXGEN_RECIPES", None)


def megatron_required() -> bool:
    return os.environ.get(REQUIRE_MEGATRON_ENV) == "1"


def megatron_recipes_path() -> Path | None:
    """The Megatron-LM tree, or None when it is absent. Under
    MATRIXGEN_REQUIRE_MEGATRON=1 an absent tree fails the test that asked,
    so that no test quietly leaves out the part that reads it."""
    value = os.environ.get(MEGATRON_ENV)
    if value:
        path = Path(value)
    else:
        path = Path(__file__).resolve().parents[2] / "shared" / "megatron-recipes"
    if path.is_dir():
        return path
    if megatron_required():
        pytest.fail(
            f"{REQUIRE_MEGATRON_ENV}=1 but the Megatron-LM recipe tree is absent "
            f"(looked for {path}; set {MEGATRON_ENV})",
            pytrace=False,
        )
    return None


def require_megatron() -> Path:
    """The Megatron-LM tree; skips the test when it is absent (fails under
    MATRIXGEN_REQUIRE_MEGATRON=1)."""
    path = megatron_recipes_path()
    if path is None:
        pytest.skip(
            f"the Megatron-LM recipe tree is absent (set {MEGATRON_ENV}; "
            f"{REQUIRE_MEGATRON_ENV}=1 makes this a failure)"
        )
    return path


@pytest.fixture
def megatron_dir() -> Path:
    return require_megatron()


@pytest.fixture(scope="module", autouse=True)
def _no_setting_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test module leaves matrixgen's variables as it found them: a day
    pinned by a module's fixture and never put back made the next module judge
    expiry against the wrong day (set up first, this is torn down last)."""
    before = {k: v for k, v in os.environ.items() if k.startswith("MATRIXGEN_")}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith("MATRIXGEN_")}
    assert after == before, (
        f"{request.module.__name__} left {set(before.items()) ^ set(after.items())}"
    )


GOLDENS_ENV = "MATRIXGEN_MEGATRON_GOLDENS"


def megatron_goldens_path() -> Path | None:
    """Megatron-LM's golden-values changes (before and after files of real
    refresh commits, `$MATRIXGEN_MEGATRON_GOLDENS`), or None when absent;
    under MATRIXGEN_REQUIRE_MEGATRON=1 an absent folder fails the test."""
    value = os.environ.get(GOLDENS_ENV)
    if value:
        path = Path(value)
    else:
        path = Path(__file__).resolve().parents[2] / "shared" / "megatron-goldens"
    if path.is_dir():
        return path
    if megatron_required():
        pytest.fail(
            f"{REQUIRE_MEGATRON_ENV}=1 but Megatron-LM's golden-values changes are absent "
            f"(looked for {path}; set {GOLDENS_ENV})",
            pytrace=False,
        )
    return None


def require_megatron_goldens() -> Path:
    """The golden-values changes; skips the test when they are absent (fails
    under MATRIXGEN_REQUIRE_MEGATRON=1)."""
    path = megatron_goldens_path()
    if path is None:
        pytest.skip(
            f"Megatron-LM's golden-values changes are absent (set {GOLDENS_ENV}; "
            f"{REQUIRE_MEGATRON_ENV}=1 makes this a failure)"
        )
    return path


# A day on which every entry of the shipped recipes/quarantine.yaml is in force
# (after each was added, before any expires). Tests that run the commands on the
# shipped tree check expiry against it, not against the calendar: the entries
# expire by design, and the suite must not start failing on that day.
SHIPPED_QUARANTINE_DAY = dt.date(2026, 12, 1)


@pytest.fixture
def pinned_today(monkeypatch: pytest.MonkeyPatch) -> dt.date:
    """Quarantine expiry, as `validate` (and every command that runs its checks)
    sees it, is checked against SHIPPED_QUARANTINE_DAY (through MATRIXGEN_TODAY,
    so subprocesses such as gitlab-ci-local's jobs see the same day)."""
    from matrixgen.quarantine.policy import TODAY_VARIABLE

    monkeypatch.setenv(TODAY_VARIABLE, SHIPPED_QUARANTINE_DAY.isoformat())
    return SHIPPED_QUARANTINE_DAY


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write {relative path: text} below root; text is dedented."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Callable[[Mapping[str, str | bytes]], Path]:
    """tree({...}) writes a recipe tree in a fresh directory and returns it."""
    counter = iter(range(1_000_000))

    def make(files: Mapping[str, str | bytes]) -> Path:
        return write_tree(tmp_path / f"tree{next(counter)}", files)

    return make


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"Run(code={self.code}, out={self.out[:400]!r}, err={self.err[:800]!r})"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """cli("list", "--recipes", d) runs the CLI in-process and captures its output."""

    def run(*args: str | Path) -> Run:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


def run_cli(args: list[str]) -> Run:
    """The CLI in-process, its output captured without a fixture (also inside
    Hypothesis examples, where capsys is not reset between examples)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return Run(code, out.getvalue(), err.getvalue())
