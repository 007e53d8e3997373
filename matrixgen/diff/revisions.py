"""The diff of two revisions: each side's tree read from git (or the working
tree), loaded and checked (`Side`), then compared target by target
(`diff.compare`); the findings the head adds or removes; and the golden-values
review started as early as the commits are known.

A side whose recipes have errors is still compared, and the notes say so; a
bad project config on a side stops the diff (exit 3) and names the side.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from msgspec.structs import replace

from matrixgen.diff.compare import diff_generations
from matrixgen.diff.gitsource import Repository, TreeSource
from matrixgen.diff.model import SelectionDiff, Side
from matrixgen.diff.targets import resolve_diff_targets
from matrixgen.documents.config import DEFAULT_CONFIG
from matrixgen.engine.load import tree_config
from matrixgen.model.errors import Finding, MatrixgenError, UsageError
from matrixgen.model.vocab import CONFIG_FILENAME
from matrixgen.pipeline import PipelineCache, generate_from_files

if TYPE_CHECKING:
    from matrixgen.diff.golden_review import EarlyReview


def load_side(name: str, source: TreeSource, cache: PipelineCache) -> Side:
    """Load, expand and check one side; a bad project config names the side it is on."""
    from matrixgen.validate import validate_generation  # imports every stage's checks

    root = source.path or "."
    try:
        generation = generate_from_files(
            source.files, root=root, blob_ids=source.blob_ids, cache=cache
        )
        found = {*validate_generation(generation, schema=False)}
    except MatrixgenError as exc:
        exc.message = f"{name} ({source.label}): {exc.message}"
        raise
    found.update(generation.findings)  # the quarantine file's too
    return Side(name, source, generation, tuple(sorted(found, key=Finding.sort_key)))


_DIGITS = re.compile(r"[0-9]+")


def finding_changes(
    base: Sequence[Finding], head: Sequence[Finding]
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """The findings head has and base has not, and the reverse, compared by
    severity, code, file and message, numbers left out (a line moved by an edit
    above it, a count in the message that another row changes: the same
    finding), each as many times as one side has it more than the other."""
    from collections import Counter

    def key(f: Finding) -> tuple[str, str, str, str]:
        return (f.severity.value, f.code, f.location.file, _DIGITS.sub("0", f.message))

    before, after = Counter(map(key, base)), Counter(map(key, head))
    added, removed = after - before, before - after

    def pick(findings: Sequence[Finding], wanted: Counter) -> tuple[Finding, ...]:
        out = []
        for f in findings:
            if wanted[key(f)] > 0:
                wanted[key(f)] -= 1
                out.append(f)
        return tuple(out)

    return pick(head, added), pick(base, removed)


def side_notes(side: Side) -> list[str]:
    """What a reader must know about one side: an absent tree, errors in it."""
    notes = []
    where = side.source.path or "the repository top"
    if not side.source.present:
        other = "added" if side.name == "base" else "removed"
        notes.append(
            f"{side.label}: {where} does not exist there; "
            f"it counts as an empty tree (every job is {other})"
        )
    if side.errors:
        notes.append(
            f"{side.label}: {len(side.errors)} error(s) in the recipe tree: `matrixgen "
            "validate` fails there and the emitters would refuse it; what could not be "
            "read yields no jobs on this side, what was read is compared as it is"
        )
    return notes


def _read_sides(
    repo: Repository, path: str, base: str, head: str | None
) -> tuple[TreeSource, TreeSource]:
    """Both sides' trees. The working tree is read first: the files it holds
    as the base has them (the same blob id) are not read from git again. A
    problem of the base is still the one reported when both sides have one."""
    if head is not None:
        return repo.read(base, path), repo.read(head, path)
    try:
        head_source = repo.read(None, path)
    except Exception:  # whatever it is, the base's own problem comes first
        repo.read(base, path)
        raise
    return repo.read(base, path), head_source


def _start_early(
    early: EarlyReview, repo: Repository, path: str, base: str, head: str | None
) -> None:
    """Start the golden-values review before the trees are read, when the
    working tree has no project config where the tree lies (the review is
    then Megatron-LM's layout, should the revisions agree)."""
    if os.path.lexists(repo.top / path / CONFIG_FILENAME):
        return  # its references decide: started once the trees are read
    try:
        base_commit = repo.resolve(base)
        head_commit = repo.resolve(head) if head is not None else None
    except MatrixgenError:
        return  # reading the sides says so, in its order
    early.start([DEFAULT_CONFIG, DEFAULT_CONFIG], base_commit, head_commit)


def diff_revisions(
    repo: Repository,
    path: str,
    base: str,
    head: str | None = None,
    *,
    values: Sequence[str] = (),
    holding_pen: bool = False,
    cache: PipelineCache | None = None,
    early: EarlyReview | None = None,
) -> tuple[SelectionDiff, list[Side]]:
    """The selection diff between two revisions (head None: the working tree).
    With `early`, the golden-values review's reading starts as soon as its
    template is known (`_start_early`, else from the trees' configs), and it
    is given the targets compared."""
    cache = cache if cache is not None else PipelineCache()
    if early is not None:
        _start_early(early, repo, path, base, head)
    base_source, head_source = _read_sides(repo, path, base, head)
    if not base_source.present and not head_source.present:
        where = path or "the repository top"
        raise UsageError(
            f"the recipe directory {where} exists neither at {base} nor at "
            f"{head or 'the working tree'} (give it with --recipes)"
        )
    if early is not None and not early.started and base_source.commit is not None:
        try:
            configs = [
                tree_config(s.files, root=s.path or ".", blob_ids=s.blob_ids, cache=cache.parsed)
                for s in (base_source, head_source)
            ]
        except MatrixgenError:
            pass  # loading the side says what is wrong with its config
        else:
            early.start(configs, base_source.commit, head_source.commit)
    sides = [load_side("base", base_source, cache), load_side("head", head_source, cache)]
    notes = [note for side in sides for note in side_notes(side)]
    pairs = resolve_diff_targets(
        sides[0].generation, sides[1].generation, values=values, holding_pen=holding_pen
    )
    if early is not None and not (values or holding_pen):
        early.pairs = pairs  # every target: the ones the review finds readers in
    result = diff_generations(
        sides[0].generation,
        sides[1].generation,
        values=values,
        holding_pen=holding_pen,
        base_ref=base_source.ref,
        head_ref=head_source.ref,
        notes=notes,
        sources=(base_source, head_source),
        cache=cache,
        pairs=pairs,
    )
    added, removed = finding_changes(sides[0].findings, sides[1].findings)
    return replace(result, findings_added=added, findings_removed=removed), sides
