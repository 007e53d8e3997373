"""The contributions registry: what one feature adds to the report and the
diff is listed by `cli.features`, named by module path, and reaches the output
only through that list."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

from matrixgen.cli.features import FEATURES, diff_contributions, report_contributions
from matrixgen.pipeline import generate
from matrixgen.report.pages import render_site
from matrixgen.report.site import gather
from matrixgen.views.contributions import load

RECIPES = Path(__file__).resolve().parents[1] / "recipes"


def test_every_contribution_names_a_function_that_exists() -> None:
    """Registered by path, so a misspelt one would only fail when a command runs it."""
    paths = [c.gather for c in report_contributions()] + [c.notes for c in diff_contributions()]
    assert paths, "no contribution listed"
    for path in paths:
        assert callable(load(path)), path


def test_every_contribution_has_its_own_name() -> None:
    for found in (report_contributions(), diff_contributions()):
        names = [c.name for c in found]
        assert len(names) == len(set(names)), names


def test_a_report_without_contributions_has_only_its_own_pages() -> None:
    """The results store's pages, columns and words come from its contribution
    alone: the report does not reach for them itself."""
    data = gather(generate(RECIPES), since_days=30, today=dt.date(2026, 11, 10))
    site = render_site(data)
    assert list(site) == ["index.html", "selection.html", "quarantine.html"]
    assert all(
        "flakes.html" not in page and "store" not in page.split("<main>")[0]
        for page in site.values()
    )


def test_listing_the_contributions_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from matrixgen.cli.features import diff_contributions, report_contributions\n"
        "report_contributions(); diff_contributions()\n"
        "heavy = [m for m in sys.modules if m.startswith(('sqlalchemy', 'matrixgen.report', "
        "'matrixgen.diff', 'matrixgen.results.store', 'matrixgen.results.site'))]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert FEATURES
