"""Golden values compared: what a change to a golden-values file does to each
of its metrics, and the values a review of such changes is made of
(docs/golden-values.md says each figure, after Megatron-LM's
`compare_golden_values_kl.py`).

Pure: values in, values out (`diff.golden_read` reads the files;
`diff.golden_review` finds the files a diff changes and the jobs that read
them). Numbers are compared as floats, as Megatron-LM's script reads them.
`max_step` is the first step (in step order) where the largest change is
reached; `steps_skipped` counts compared steps that are not measured (|old| <
1e-12, or a change too large for a float). A metric one side cannot read is
not compared. Cost: a few passes over the steps, each a comprehension or a set
operation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import compress
from typing import Any, ClassVar

from msgspec import Struct, field

from matrixgen.diff.golden_read import GoldenValues, Series
from matrixgen.model.errors import Finding, Severity
from matrixgen.util.values import JsonLayout
from matrixgen.views.references import ORPHAN_COLUMNS, OrphanFields

# |old| below this is not divided by (Megatron-LM's script skips such steps).
ZERO = 1e-12
# Metric statuses, file statuses.
ADDED = "added"
REMOVED = "removed"
CHANGED = "changed"
UNCHANGED = "unchanged"


class MetricChange(Struct, frozen=True, kw_only=True):
    """What a change of a golden-values file does to one metric (see the module)."""

    name: str
    gated: bool
    status: str
    steps_compared: int = 0
    steps_added: int = 0
    steps_removed: int = 0
    steps_skipped: int = 0
    non_finite_new: int = 0
    mean_rel_change_pct: float | None = None
    max_abs_rel_change_pct: float | None = None
    max_step: str | None = None


def _text(value: Any) -> str:
    if type(value) is float:  # NaN, or an infinity
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return json.dumps(value, sort_keys=True, allow_nan=True)


def compare_series(
    name: str,
    old: Series | None,
    new: Series | None,
    *,
    gated: bool,
    spelled: Mapping[int, str] | None = None,
) -> MetricChange:
    """One metric's change (old None: the metric is new; new None: it is
    gone); `spelled`: the new side's steps written otherwise than as
    themselves. Each pass over the steps is a comprehension or a set
    operation: the cost is a few passes, linear in the steps."""
    before: Series = old if old is not None else {}
    after: Series = new if new is not None else {}
    olds = _numbers(before)
    if (
        olds is before
        and old is not None
        and new
        and before == after
        and set(map(type, after.values())) <= _FLOAT
    ):
        # Every sample a finite float, the same on both sides: the new side's
        # floats equal finite ones, so they are finite (but 1.0 == 1 == True).
        return _unchanged(name, gated, before, spelled)
    news = _numbers(after)
    common = olds.keys() & news.keys()
    both = before.keys() & after.keys()
    added, removed = len(after) - len(both), len(before) - len(both)
    differs = bool(added or removed) or any(before[s] != after[s] for s in common)
    if not differs:
        differs = any(_text(before[s]) != _text(after[s]) for s in both - common)
    changes = {s: (x - news[s]) / x for s in common if abs(x := olds[s]) >= ZERO}
    pcts = {s: 100.0 * abs(r) for s, r in changes.items()}
    # A difference past the floats' range is not measured.
    if not all(map(math.isfinite, pcts.values())):
        pcts = {s: p for s, p in pcts.items() if math.isfinite(p)}
        changes = {s: changes[s] for s in pcts}
    largest = max(pcts.values(), default=None)
    step = min((s for s, p in pcts.items() if p == largest), default=None)
    status = ADDED if old is None else REMOVED if new is None else CHANGED if differs else UNCHANGED
    return MetricChange(
        name=name,
        gated=gated,
        status=status,
        steps_compared=len(common),
        steps_added=added,
        steps_removed=removed,
        steps_skipped=len(common) - len(changes),
        non_finite_new=len(after) - len(news),
        mean_rel_change_pct=100.0 * mean(list(changes.values())) + 0.0 if changes else None,
        max_abs_rel_change_pct=largest + 0.0 if largest is not None else None,
        max_step=None if step is None else (spelled or {}).get(step, str(step)),
    )


_FLOAT = frozenset({float})


def _unchanged(
    name: str, gated: bool, series: Series, spelled: Mapping[int, str] | None
) -> MetricChange:
    """A metric whose samples, all finite numbers, are the same on both sides."""
    skipped = sum(map(ZERO.__gt__, map(abs, series.values())))  # |x| < ZERO, counted in C
    measured = len(series) - skipped
    if not skipped:
        first = min(series, default=None)
    else:
        first = min(compress(series, map(ZERO.__le__, map(abs, series.values()))), default=None)
    return MetricChange(
        name=name,
        gated=gated,
        status=UNCHANGED,
        steps_compared=len(series),
        steps_skipped=skipped,
        mean_rel_change_pct=0.0 if measured else None,
        max_abs_rel_change_pct=0.0 if measured else None,
        max_step=(spelled or {}).get(first, str(first)) if first is not None else None,
    )


def _numbers(series: Series) -> Series:
    """The finite numbers of a series as floats (as Megatron-LM's script
    reads them): the series itself when all its samples are finite floats
    (checked in passes that run in C), else those of them converted (a boolean
    is none; x - x is 0.0 for a finite float only)."""
    kinds = set(map(type, series.values()))
    if kinds <= _FLOAT and all(map(math.isfinite, series.values())):
        return series
    return {
        s: float(v)
        for s, v in series.items()
        if (type(v) is float and v - v == 0.0) or type(v) is int
    }


def mean(values: Sequence[float]) -> float:
    """The mean of finite floats, exactly rounded where the sum fits a float."""
    try:
        return math.fsum(values) / len(values)
    except OverflowError:  # the sum passes the floats' range; the mean does not
        return math.fsum(v / len(values) for v in values)


def compare_goldens(
    old: GoldenValues | None, new: GoldenValues | None, gated: Iterable[str]
) -> tuple[MetricChange, ...]:
    """Every metric of either side (the new side's order, then the old side's
    own), compared; nothing when a side that exists cannot be read, and not the
    metrics a side cannot read."""
    if (old is not None and not old.readable) or (new is not None and not new.readable):
        return ()
    checked = frozenset(gated)
    before = old.metrics if old is not None else {}
    after = new.metrics if new is not None else {}
    skip = (old.unreadable if old else frozenset()) | (new.unreadable if new else frozenset())
    names = [*after, *(n for n in before if n not in after)]
    return tuple(
        compare_series(
            name,
            before.get(name),
            after.get(name),
            gated=name in checked,
            spelled=new.spelled.get(name) if new is not None else None,
        )
        for name in names
        if name not in skip
    )


def pct(value: float, *, signed: bool = True) -> str:
    """A percentage as the tables show it: three significant digits (at most
    eight decimals: `<0.000001%` below), no exponent below a million."""
    sign = ("+" if value > 0 else "-" if value < 0 else "") if signed else ""
    size = abs(value)
    if size == 0:
        return "0%"
    if size < 0.000001:
        return f"{sign}<0.000001%"
    if size >= 1_000_000:
        return f"{sign}{size:.2e}%"
    if size >= 1000:
        return f"{sign}{size:,.0f}%"
    digits = min(8, max(0, 2 - math.floor(math.log10(size))))
    return f"{sign}{size:.{digits}f}%"


class GoldenJob(Struct, frozen=True, order=True):
    """A job that reads a golden-values file: in which target, which case."""

    target: str
    model: str
    test_case: str


class GoldenFile(Struct, frozen=True, kw_only=True):
    """One golden-values file the diff changes."""

    path: str  # from the top of the repository
    status: str  # added, removed, changed
    # What its path says, by the template: model, test_case, environment, platform.
    fields: Mapping[str, str] = field(default_factory=dict)
    # The jobs that read it, in every target: the head's (the base's for a
    # removed file); `quarantined`: jobs a skip entry keeps from running.
    jobs: tuple[GoldenJob, ...] = ()
    quarantined: tuple[GoldenJob, ...] = ()
    metrics: tuple[MetricChange, ...] = ()
    problems: tuple[Finding, ...] = ()
    gated_by: str = "default"  # the model_config.yaml that lists METRICS, or "default"
    compared: bool = True  # False: a side could not be read, no metric is compared

    @property
    def orphan(self) -> bool:
        """No job of any target reads it (a quarantined one would)."""
        return not self.jobs and not self.quarantined

    @property
    def case(self) -> str:
        model, test_case = self.fields.get("model"), self.fields.get("test_case")
        if model and test_case:
            return f"{model}/{test_case}"
        return test_case or self.path

    @property
    def where(self) -> str:
        """The case and its hardware, as messages name the file."""
        return f"{self.case} ({self.hardware})" if self.hardware else self.case

    @property
    def hardware(self) -> str:
        parts = [self.fields.get("environment"), self.fields.get("platform")]
        return " ".join(p for p in parts if p)

    @property
    def told(self) -> OrphanFields:
        """What its path tells of the jobs that read it."""
        return OrphanFields(**{k: v for k, v in self.fields.items() if k in ORPHAN_COLUMNS})

    # Its JSON (the diff's `golden_changes`): the file, what its path tells, who
    # reads it, and each metric's change.
    JSON: ClassVar[JsonLayout] = JsonLayout(
        keys=(
            ("path", "path"),
            ("status", "status"),
            *((k, f"told.{k}") for k in ORPHAN_COLUMNS),
            ("jobs", "jobs"),
            ("quarantined_jobs", "quarantined"),
            *((k, k) for k in ("orphan", "gated_by", "compared", "metrics", "problems")),
        )
    )


class GoldenFigures(Struct, frozen=True, kw_only=True):
    """What `--expect golden...` rules check, over some files, and where each
    figure comes from (`places`: a few of its files or metrics, for a message)."""

    files: int = 0
    others: int = 0  # files of the other test cases
    orphans: int = 0
    missing: int = 0  # steps removed, over every metric
    nonfinite: int = 0  # non-finite samples of the new side, over every metric
    problems: int = 0  # files with a problem of the error kind
    # The largest gated |mean| and step change, in percent.
    mean: float = 0.0
    max: float = 0.0
    places: Mapping[str, str] = field(default_factory=dict)


# A figure's message names this many of the places it comes from.
PLACES_SHOWN = 3


def _places(items: Sequence[str]) -> str:
    shown = ", ".join(items[:PLACES_SHOWN])
    more = len(items) - PLACES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


class GoldenReview(Struct, frozen=True, kw_only=True):
    """Every golden-values file a diff changes (added, removed, changed)."""

    template: str  # the path template the files fit, from the top of the repository
    files: tuple[GoldenFile, ...] = ()

    @property
    def test_cases(self) -> tuple[str, ...]:
        return tuple(
            sorted({f.fields["test_case"] for f in self.files if f.fields.get("test_case")})
        )

    def figures(self, wanted: Callable[[str], bool] | None = None) -> GoldenFigures:
        """The figures of the files whose test case `wanted` accepts (None: all)."""
        chosen = [f for f in self.files if wanted is None or wanted(f.fields.get("test_case", ""))]
        others = [f for f in self.files if f not in chosen]
        mean_value: float | None = None
        max_value: float | None = None
        places: dict[str, list[str]] = {k: [] for k in ("missing", "nonfinite", "problems")}
        places |= {
            "files": [f.where for f in chosen],
            "others": [f.where for f in others],
            "orphans": [f.where for f in chosen if f.orphan],
            "mean": [],
            "max": [],
        }
        for f in chosen:
            where = f.where
            if any(p.severity is Severity.ERROR for p in f.problems):
                places["problems"].append(where)
            for m in f.metrics:
                if m.steps_removed:
                    places["missing"].append(f"{m.name} of {where}: {m.steps_removed}")
                if m.non_finite_new:
                    places["nonfinite"].append(f"{m.name} of {where}: {m.non_finite_new}")
                if not m.gated:
                    continue
                mean = m.mean_rel_change_pct
                if mean is not None and (mean_value is None or abs(mean) > mean_value):
                    mean_value = abs(mean)
                    places["mean"] = [f"{m.name} of {where}"]
                top = m.max_abs_rel_change_pct
                if top is not None and (max_value is None or top > max_value):
                    max_value = top
                    places["max"] = [f"{m.name} at step {m.max_step} of {where}"]
        return GoldenFigures(
            files=len(chosen),
            others=len(others),
            orphans=len(places["orphans"]),
            missing=sum(m.steps_removed for f in chosen for m in f.metrics),
            nonfinite=sum(m.non_finite_new for f in chosen for m in f.metrics),
            problems=len(places["problems"]),
            mean=mean_value or 0.0,
            max=max_value or 0.0,
            places={k: _places(v) for k, v in places.items() if v},
        )
