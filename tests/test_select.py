"""Selection semantics, on jobs built directly (no files)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from matrixgen.engine.select import matches, select
from matrixgen.model.errors import UsageError
from matrixgen.model.jobs import Job, Selector


def job(**overrides) -> Job:
    base = dict(
        model="gpt",
        test_case="tc",
        environment="dev",
        platform="dgx_h100",
        tag=None,
        scope="mr",
        cadence=("pr", "nightly", "mergegroup"),
        name="n",
        build=None,
        n_repeat=5,
        time_limit=2700,
    )
    base.update(overrides)
    return Job(**base)


@pytest.mark.parametrize(
    "asked,job_scope,expected",
    [
        ("nightly", "L2", True),
        ("L2", "L2", True),
        ("mr-github", "L1", True),
        ("mr-github-slim", "L0", True),
        ("weekly", "L3", True),
        ("mr", "mr", True),
        ("mr", "L1", False),
        ("mr-slim", "mr", False),
        ("nightly", "nightly-broken", False),
        ("L1", "mr-github", False),  # jobs hold resolved scopes; a raw name never matches a tier
    ],
)
def test_scope_aliases_on_the_asked_side(asked: str, job_scope: str, expected: bool) -> None:
    assert matches(job(scope=job_scope), Selector(scope=asked)) is expected


def test_cadence_must_be_in_the_jobs_list() -> None:
    j = job(cadence=("nightly",))
    assert matches(j, Selector(cadence="nightly"))
    assert not matches(j, Selector(cadence="pr"))
    assert matches(j, Selector())  # no cadence asked: no filter


def test_every_criterion_is_an_intersection() -> None:
    jobs = [
        job(test_case="a", platform="dgx_h100", tag="latest", model="unit-tests"),
        job(test_case="b", platform="dgx_gb200", tag="legacy", model="unit-tests"),
        job(test_case="c", platform="dgx_h100", environment="lts"),
    ]
    assert [j.test_case for j in select(jobs, Selector(platform="dgx_h100"))] == ["a", "c"]
    assert [j.test_case for j in select(jobs, Selector(tag="legacy"))] == ["b"]
    assert [j.test_case for j in select(jobs, Selector(model="gpt"))] == ["c"]
    assert [j.test_case for j in select(jobs, Selector(test_cases=("a", "c")))] == ["a", "c"]
    both = Selector(platform="dgx_h100", environment="lts")
    assert [j.test_case for j in select(jobs, both)] == ["c"]
    # A job without a tag never matches a tag filter.
    assert [j.test_case for j in select(jobs, Selector(tag="latest"))] == ["a"]


def test_unknown_cadence_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match='did you mean "nightly"'):
        select([job()], Selector(cadence="nighly"))


def test_list_refuses_values_the_vocabulary_does_not_declare(tree: Callable, cli: Callable) -> None:
    from tests.tree_fixtures import v2_tree

    root = tree(
        v2_tree("""
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr, nightly], tag: [latest]}
""")
    )
    for option, typo, meant in (
        ("--platform", "dgx-h100", "dgx_h100"),
        ("--scope", "nightyl", "nightly"),
        ("--environment", "deev", "dev"),
        ("--tag", "lastest", "latest"),
    ):
        run = cli("list", "--recipes", root, option, typo)
        assert run.code == 2 and run.out == "", (option, run)
        assert f'{option} "{typo}" is not declared' in run.err
        assert f'did you mean "{meant}"?' in run.err
    # Declared values select, legacy names too; a declared value no job has is fine.
    assert cli("list", "--recipes", root, "--scope", "L2", "--format", "json").out.count("tc") == 2
    quiet = cli("list", "--recipes", root, "--environment", "lts", "--format", "json")
    assert quiet.code == 0 and quiet.out == "[]\n" and "warning" not in quiet.err
    # No vocabulary lists test cases: a test case no job has is refused the same way.
    case = cli("list", "--recipes", root, "--test-case", "tcc", "--format", "json")
    assert case.code == 2 and case.out == "", case
    assert (
        '--test-case "tcc": no job of the tree has this test case (did you mean "tc"?)' in case.err
    )


@pytest.mark.parametrize(
    ("option", "typo", "meant", "used"),
    [
        # The tree's own words: it writes nightly, never L2.
        (
            "--scope",
            "mrr",
            "mr",
            "L0-smoke, cleanup, deprecated, flaky, mr, mr-broken, mr-github "
            "(also known as L1), mr-github-broken, mr-github-slim (also known as L0), "
            "mr-github-temp-disabled, mr-slim, nightly (also known as L2), nightly-broken, "
            "unit-tests, weekly (also known as L3)",
        ),
        ("--scope", "nightlyy", "nightly", "mr-broken"),  # legacy names are suggested too
        ("--model", "gtp", "gpt", "bert, cleanup, common, gpt, gpt-nemo"),
        ("--environment", "devv", "dev", "used: dev, lts"),
        ("--platform", "dgx_h10", "dgx_h100", "dgx_a100, dgx_gb200, dgx_h100"),
        ("--tag", "lates", "latest", "used: latest, legacy"),
        ("--test-case", "gpt3_mcore_tp1_pp22", "gpt3_mcore_tp1_pp2", "292 are used"),
    ],
)
def test_list_refuses_values_no_job_of_a_v1_tree_uses(
    cli: Callable, megatron_dir: Path, option: str, typo: str, meant: str, used: str
) -> None:
    # Megatron-LM's parser selects nothing for such a value and says nothing; a
    # tree without vocabulary is as strict as one with: exit 2, "did you mean"
    # from the values the tree uses.
    run = cli("list", "--recipes", megatron_dir, option, typo, "--format", "json")
    assert run.code == 2 and run.out == "", run
    assert f'matrixgen: {option} "{typo}": no job of the tree has this ' in run.err
    assert f'(did you mean "{meant}"?)' in run.err and used in run.err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("stats", "--exclude-platform", "dgx_h10"), '--exclude-platform "dgx_h10"'),
        (("quarantine", "list", "--platform", "dgx_h10"), '--platform "dgx_h10"'),
        (
            ("coverage", "--reference", "g=x/{model}", "--exclude-model", "unit-test"),
            '--exclude-model "unit-test": no job of the tree has this model (did you mean '
            '"unit-tests"?)',
        ),
        (
            (
                "coverage",
                "--reference",
                "g=x/{model}",
                "--target",
                "scope=mr,platform=dgx_h10,environment=dev",
            ),
            'target gitlab-mr-dgx_h10-dev: platform "dgx_h10"',
        ),
        (
            ("stats", "--target", "scope=mr,platform=dgx_h100,environment=devv"),
            'environment "devv": no job of the tree has this environment (did you mean "dev"?)',
        ),
        (
            ("graph", "--target", "scope=mrr,platform=dgx_h100,environment=dev"),
            'scope "mrr": no job of the tree has this scope (did you mean "mr"?)',
        ),
    ],
)
def test_every_command_refuses_values_no_job_of_a_v1_tree_uses(
    cli: Callable, megatron_dir: Path, args: tuple[str, ...], says: str
) -> None:
    run = cli(*args, "--recipes", megatron_dir)
    assert run.code == 2 and run.out == "", run
    assert says in run.err
    if "platform" in says:
        assert '(did you mean "dgx_h100"?)' in run.err


@pytest.mark.parametrize(
    ("option", "value", "jobs"),
    [
        # Legacy scope names and the tiers they resolve to select the same jobs,
        # as the parser's `--scope` does (figures of Megatron-LM's parser).
        ("--scope", "mr-github", 108),
        ("--scope", "L1", 108),
        ("--scope", "nightly", 163),
        ("--scope", "L2", 163),
        ("--scope", "weekly", 4),
        ("--scope", "mr-github-slim", 12),
    ],
)
def test_list_takes_legacy_scope_names_and_tiers(
    cli: Callable, megatron_dir: Path, option: str, value: str, jobs: int
) -> None:
    run = cli("list", "--recipes", megatron_dir, option, value, "--format", "json")
    assert run.code == 0, run
    assert len(json.loads(run.out)) == jobs


def _built(text: str) -> str:
    """The same text as a new string object, as one read from a file or argv is."""
    return "".join(list(text))


@pytest.mark.parametrize("field", ["environment", "platform", "model", "tag", "scope"])
def test_each_criterion_keeps_exactly_the_equal_values(field: str) -> None:
    # Values that sort before and after the asked one, and the asked one as a
    # distinct string object: equality, not identity or order, decides.
    values = {
        "environment": ["dev", "lts", "zzz"],
        "platform": ["dgx_a100", "dgx_h100", "dgx_z"],
        "model": ["bert", "gpt", "t5"],
        "tag": ["alpha", "latest", "zeta"],
        "scope": ["L0", "mr", "nightly-x"],
    }[field]
    jobs = [job(**{field: _built(v)}, test_case=v) for v in values]
    asked = _built(values[1])
    assert asked is not jobs[1].__getattribute__(field)
    chosen = select(jobs, Selector(**{field: asked}))
    assert [j.test_case for j in chosen] == [values[1]]


def test_declared_scopes_are_listed_in_the_trees_words(cli: Callable) -> None:
    # The shipped tree declares nightly (tier L2): the tier is named only as
    # "also known as", never beside it as a scope of its own.
    run = cli("list", "--scope", "mrr", "--recipes", Path(__file__).parent.parent / "recipes")
    assert run.code == 2, run
    assert run.err.endswith("declared: L0, L1, mr, mr-slim, nightly (also known as L2)\n"), run


@given(st.sets(st.sampled_from(["L0", "L1", "L2", "L3", "mr", "mr-github", "nightly", "weekly"])))
def test_scope_names_name_each_scope_once_in_the_trees_word(names: set[str]) -> None:
    from matrixgen.model.vocab import resolve_scope, scope_names

    shown = scope_names(names)
    words = [s.split(" (also known as ")[0] for s in shown]
    # Each scope once: a tier and its legacy name are one scope, shown by the name.
    assert sorted({resolve_scope(n) for n in names}) == sorted(resolve_scope(w) for w in words)
    assert all(w in names or resolve_scope(w) != w for w in words)
    assert all(resolve_scope(n) == n or n in words for n in names)


# --------------------------------------------------------------------------- one job per identity

_LINES = st.lists(st.integers(1, 60), min_size=1, max_size=8, unique=True)


def _doubled(cases: list[str], cadences: list[tuple[str, ...]], lines: list[int]) -> list[Job]:
    """Jobs as expansion gives them: sorted, and each copy of a job that several
    rows define lists where every copy is."""
    from matrixgen.engine.expand import _mark_duplicates
    from matrixgen.model.errors import Location

    jobs = [
        job(test_case=c, cadence=k, source=Location("f.yaml", n, 3))
        for c, k, n in zip(cases, cadences, lines, strict=False)
    ]
    return _mark_duplicates(sorted(jobs, key=Job.sort_key))


@given(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=8),
    st.lists(st.sampled_from([("pr",), ("nightly",), ("pr", "nightly")]), min_size=8, max_size=8),
    _LINES,
    st.sampled_from([None, "pr", "nightly"]),
)
@example(["a", "a", "b"], [("pr",)] * 8, [5, 2, 9], None)  # a doubled job beside a single one
@example(["a", "a"], [("pr",), ("nightly",)] + [("pr",)] * 6, [1, 2], "pr")  # one copy taken
def test_a_selection_keeps_the_last_copy_of_each_job_and_every_other_job(
    cases: list[str], cadences: list[tuple[str, ...]], lines: list[int], cadence: str | None
) -> None:
    jobs = _doubled(cases, cadences, lines)
    matching = [j for j in jobs if matches(j, Selector(cadence=cadence))]
    chosen = select(jobs, Selector(cadence=cadence))
    # One job per identity and scope, each of those the selection matches.
    keys = [j.duplicate_key() for j in chosen]
    assert len(keys) == len(set(keys))
    assert set(keys) == {j.duplicate_key() for j in matching}
    for kept in chosen:
        copies = [j for j in matching if j.duplicate_key() == kept.duplicate_key()]
        # The last copy in file order is the job; it lists where the copies this
        # selection takes are, and none when it takes only this one.
        assert kept.source == max(j.source for j in copies)
        where = tuple(sorted(j.source for j in copies))
        assert kept.definitions == (where if len(copies) > 1 else ())


# --------------------------------------------------------------------------- the job index


@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, "mr", "L2", "L0"]),
            st.sampled_from(["dgx_h100", "dgx_a100"]),
            st.sampled_from(["dev", "lts"]),
        ),
        max_size=12,
    ),
    st.sampled_from([None, "mr", "nightly", "L2", "L0"]),
    st.sampled_from([None, "dgx_h100", "dgx_a100"]),
    st.sampled_from([None, "dev", "lts"]),
)
@example([("mr", "dgx_h100", "dev")], None, "dgx_h100", "dev")  # no scope asked
@example([("L2", "dgx_h100", "dev")], "nightly", "dgx_h100", "dev")  # a legacy name
def test_the_job_index_offers_every_job_a_selector_matches(
    places: list[tuple[str | None, str, str]],
    scope: str | None,
    platform: str | None,
    environment: str | None,
) -> None:
    from matrixgen.engine.select import JobIndex

    jobs = [
        job(scope=s, platform=p, environment=e, test_case=f"t{i}")
        for i, (s, p, e) in enumerate(places)
    ]
    selector = Selector(scope=scope, platform=platform, environment=environment)
    assert select(JobIndex(jobs).candidates(selector), selector) == select(jobs, selector)


# --------------------------------------------------------------------------- used values

_NAMES = st.sampled_from(["L0", "L2", "L3", "nightly", "weekly", "mr", "dev", ""])


@given(st.sampled_from(["environment", "platform", "model", "tag", "test_case"]), st.lists(_NAMES))
@example("model", ["L2"])  # a model named as a tier has no legacy name
@example("tag", ["L2"])
@example("platform", ["L3"])
def test_only_scopes_gain_their_legacy_names(key: str, values: list[str]) -> None:
    from matrixgen.engine.select import used_values

    jobs = [job(**{key: v}) for v in values]
    assert used_values(key, jobs) == {v for v in values if v}
    # A scope's tier brings every legacy name of it.
    assert used_values("scope", [job(scope="L2"), job(scope="mr")]) == {"L2", "nightly", "mr"}


# --------------------------------------------------------------------------- declared values

# Each key declares L2, and all but scopes weekly (L3's legacy name as a scope).
NAMED_LIKE_TIERS = b"""format_version: 2
vocabulary:
  platforms: [dgx_h100, L2, weekly]
  environments: [dev, L2, weekly]
  scopes: {gitlab: [mr, L2]}
  tags: [latest, L2, weekly]
"""


@pytest.mark.parametrize(
    ("key", "refused"),
    [("platform", True), ("environment", True), ("tag", True), ("scope", False)],
)
def test_only_a_scope_is_declared_by_its_tier(key: str, refused: bool) -> None:
    # `nightly` is L2's legacy name as a scope only; other keys' declared values
    # are listed as written, never as scopes ("weekly (also known as L3)").
    from matrixgen.engine.select import value_problem
    from matrixgen.pipeline import generate_from_files

    recipe = b"""type: basic
format_version: 2
spec: {name: "{test_case}", model: gpt, platforms: dgx_h100, build: img}
products:
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr]}
"""
    generation = generate_from_files({"matrixgen.yaml": NAMED_LIKE_TIERS, "gpt.yaml": recipe})
    config, jobs = generation.tree.config, generation.jobs
    assert config.vocabulary is not None
    problem = value_problem(f"--{key}", key, "nightly", config, jobs)
    assert (problem is not None) is refused
    if refused:
        assert problem == (
            f'--{key} "nightly" is not declared in matrixgen.yaml; declared: '
            f"{', '.join(sorted(config.vocabulary.declared(key)))}"
        )


@pytest.mark.parametrize("used", [24, 25])
def test_up_to_24_used_values_are_listed_then_counted(used: int) -> None:
    from matrixgen.engine.select import unused_value

    names = [f"m{i:02}" for i in range(used)]
    message = unused_value("model", "zz", names, prefix='--model "zz"')
    listed = f"; used: {', '.join(names)}" if used <= 24 else f" ({used} are used)"
    assert message == f'--model "zz": no job of the tree has this model{listed}'


def test_a_test_case_no_job_has_is_named_in_words() -> None:
    from matrixgen.engine.select import value_problem
    from matrixgen.pipeline import generate_from_files

    recipe = b"""type: basic
format_version: 1
spec: {name: "{test_case}", model: gpt, platforms: dgx_h100}
products:
  - test_case: [tc]
    products:
      - {environment: [dev], scope: [mr]}
"""
    generation = generate_from_files({"gpt.yaml": recipe})
    assert value_problem(
        "--test-case", "test_case", "tcc", generation.tree.config, generation.jobs
    ) == ('--test-case "tcc": no job of the tree has this test case (did you mean "tc"?); used: tc')
