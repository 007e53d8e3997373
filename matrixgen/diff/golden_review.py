"""The golden-values review of a diff: every golden-values file the branch
adds, removes or changes, compared metric by metric (`diff.golden_read`,
`diff.goldens`), with the jobs that read it; docs/golden-values.md says which
files and which jobs.

A changed file is read on each side it is on, within GOLDEN_MAX_BYTES (its size
asked of git first; a link or special file is not followed). A file's readers
are the jobs whose rendered template is its path, or whose path it is a
`_suffix` variant of (the `_2nd` values of a resumed run); habit scopes' holding
pens are left out, and jobs a skip entry keeps from running are listed apart.

Cost: one tree diff, then one `git cat-file` process that asks every size and
reads every blob within the bound (the configs' too); linear in the changed
files' size. Git's part runs in a thread started as soon as the commits are
known (`EarlyReview`), while the diff reads and expands the recipe trees: the
thread only waits on git, leaving the interpreter to the loading.
"""

from __future__ import annotations

import posixpath
import sys
import threading
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from matrixgen.diff.gitsource import PathChange, Repository, blob_id
from matrixgen.diff.golden_read import (
    CONFIG_NAME,
    GOLDEN_MAX_BYTES,
    Gating,
    GoldenValues,
    parse_golden,
    read_gating,
    too_large,
    unread_gating,
    unreadable,
)
from matrixgen.diff.goldens import (
    ADDED,
    CHANGED,
    REMOVED,
    GoldenFile,
    GoldenJob,
    GoldenReview,
    MetricChange,
    compare_goldens,
)
from matrixgen.diff.targets import resolve_diff_targets
from matrixgen.model.jobs import Job
from matrixgen.model.references import (
    ORPHAN_FIELDS,
    ReferenceTemplate,
    TemplateMatcher,
    reference_path,
    used_by_dir,
    variant_of,
)
from matrixgen.model.templates import TemplateError
from matrixgen.util.readfile import NotRegularFile, read_regular

if TYPE_CHECKING:
    from matrixgen.diff.model import Side, TargetPair
    from matrixgen.documents.config import ProjectConfig
    from matrixgen.model.jobs import Target
    from matrixgen.pipeline import Generation

    Named = tuple[str, Target | None]  # a target's name, and how one side defines it

GOLDEN = "golden"  # the reference name of golden values in a project config
MEGATRON_TEMPLATE = ReferenceTemplate(
    GOLDEN,
    "tests/functional_tests/test_cases/{model}/{test_case}/golden_values_{environment}_{platforms}.json",
)
_LINK, _SUBMODULE = "120000", "160000"


def golden_template(configs: Sequence[ProjectConfig]) -> tuple[ReferenceTemplate, str] | None:
    """The golden template and its root, from each side's project config (base,
    head): the head's config decides (the base's when the head has none); no
    config on either side: Megatron-LM's layout."""
    for config in reversed(configs):
        if config.document is None:
            continue
        settings = config.references
        if settings is None:
            return None
        found = next((t for t in settings.templates if t.name == GOLDEN), None)
        return (found, settings.root) if found is not None else None
    return MEGATRON_TEMPLATE, ""


class _Read(NamedTuple):
    """One golden-values file git says differs: each side read, the case's
    gating, its metrics compared (all but the jobs that read it)."""

    change: PathChange
    rel: str  # its path below the template's root
    old: GoldenValues | None
    new: GoldenValues | None
    gate: Gating
    metrics: tuple[MetricChange, ...]


class EarlyReview:
    """The review's git work, run in a thread while the recipe trees load
    (see the module); `golden_review` takes it. When the sides decide another
    template than the one `start` was given (a guess from the working tree
    the revisions do not bear out), the work is not used. `pairs`: the targets
    the diff compares, when it compares every one (the readers are found there)."""

    # While the thread runs, the GIL passes between threads this often
    # (seconds): the thread is not kept waiting the default 5 ms each time git
    # answers it.
    SWITCH_INTERVAL = 0.0005

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.pairs: list[TargetPair] | None = None
        self._thread: threading.Thread | None = None
        self._key: tuple[tuple[ReferenceTemplate, str], str, str | None] | None = None
        self._fetched: _Reading | None = None
        self._error: BaseException | None = None
        self._interval: float | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(
        self, configs: Sequence[ProjectConfig], base_commit: str, head_commit: str | None
    ) -> None:
        """Start the work for the template these configs decide (none: nothing)."""
        chosen = golden_template(configs)
        if self._thread is not None or chosen is None:
            return
        self._key = (chosen, base_commit, head_commit)
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._interval, self.SWITCH_INTERVAL))
        self._thread = threading.Thread(
            target=self._run, args=(*chosen, base_commit, head_commit), daemon=True
        )
        self._thread.start()

    def _run(
        self, template: ReferenceTemplate, root: str, base_commit: str, head_commit: str | None
    ) -> None:
        try:
            self._fetched = _fetch_changed(
                self.repo, template, root, base_commit, head_commit, False
            )
        except BaseException as exc:  # raised where the review is asked for
            self._error = exc

    def take(
        self, chosen: tuple[ReferenceTemplate, str], base_commit: str, head_commit: str | None
    ) -> list[_Read] | None:
        """The files read for this template and these commits (None: the work
        was for others, or never started)."""
        if self._thread is None:
            return None
        self.close()
        if self._key != (chosen, base_commit, head_commit):
            return None
        if self._error is not None:
            raise self._error
        return self._fetched.finish() if self._fetched is not None else None

    def close(self) -> None:
        """Wait for the thread, and give the GIL its usual switch interval back."""
        if self._thread is not None:
            self._thread.join()
        if self._interval is not None:
            sys.setswitchinterval(self._interval)
            self._interval = None


def golden_review(
    repo: Repository, sides: Sequence[Side], early: EarlyReview | None = None
) -> GoldenReview | None:
    """The review of every golden-values file that differs between the sides
    (None: the tree declares no golden values); `early`: its files, read in a
    thread while the sides were loaded."""
    chosen = golden_template([side.generation.tree.config for side in sides])
    if chosen is None:
        return None
    template, root = chosen
    base, head = sides
    shown = posixpath.join(root, template.template) if root else template.template
    base_commit = base.source.commit
    assert base_commit is not None  # the base is always a commit
    head_commit = head.source.commit
    found = early.take(chosen, base_commit, head_commit) if early is not None else None
    if found is None:  # each blob read into its values as git hands it over
        found = _fetch_changed(repo, template, root, base_commit, head_commit, True).finish()
    if not found:
        return GoldenReview(template=shown)
    # The values the jobs use split each name as they would render it.
    matcher = TemplateMatcher.build(template, _known(base.generation, head.generation))
    fitted = []
    for item in found:
        fields = matcher.fit(item.rel) or {}  # it fits: known values change the split only
        told = {ORPHAN_FIELDS[k]: v for k, v in fields.items() if k in ORPHAN_FIELDS}
        fitted.append((item, told))
    pairs = early.pairs if early is not None else None
    pairs = pairs or resolve_diff_targets(base.generation, head.generation)
    cases = {fields.get("test_case") for _, fields in fitted}
    readers = {
        "base": _Readers(template, base.generation, [(p.shown.name, p.base) for p in pairs], cases),
        "head": _Readers(template, head.generation, [(p.shown.name, p.head) for p in pairs], cases),
    }
    files = []
    for item, fields in fitted:
        change = item.change
        jobs, quarantined = readers["base" if change.status == "D" else "head"].of(item.rel)
        sides_read = [v for v in (item.old, item.new) if v is not None]
        files.append(
            GoldenFile(
                path=change.path,
                status={"A": ADDED, "D": REMOVED}.get(change.status, CHANGED),
                fields=fields,
                jobs=jobs,
                quarantined=quarantined,
                metrics=item.metrics,
                problems=tuple(p for v in sides_read for p in v.problems) + item.gate.problems,
                gated_by=item.gate.source,
                compared=all(v.readable for v in sides_read),
            )
        )
    return GoldenReview(template=shown, files=tuple(files))


def _fetch_changed(
    repo: Repository,
    template: ReferenceTemplate,
    root: str,
    base_commit: str,
    head_commit: str | None,
    as_it_comes: bool,
) -> _Reading:
    """Every file that fits the template and differs between the commits
    (head None: the working tree): git's tree diff, and every blob asked.
    `as_it_comes`: each blob is also read into its values as it comes (else
    `finish` reads them all, and the fetching thread leaves the interpreter
    to the loading of the sides)."""
    start = posixpath.join(root, template.static_dir) if root else template.static_dir
    # Known values change how a name splits, never whether it fits: the
    # files are found before the jobs are known.
    matcher = TemplateMatcher.build(template, {})
    found: list[tuple[PathChange, str]] = []
    trees: dict[str, tuple[str | None, str | None]] = {}
    changed = repo.changed_files(base_commit, head_commit, start, trees)
    # The blob ids the tree diff gives of other files (a case's model_config.yaml
    # added or changed with it): read by id, not looked up by path again.
    known = {
        (side, c.path): oid
        for c in changed
        for side, oid in (("base", c.old), ("head", c.new))
        if oid
    }
    for change in changed:
        if _SUBMODULE in (change.old_mode, change.new_mode):
            continue
        rel = _below(change.path, root)
        if rel is not None and matcher.fit(rel) is not None:
            found.append((change, rel))
    reading = _Reading(repo, base_commit, head_commit, found, known, trees)
    if found:
        reading.fetch(as_it_comes=as_it_comes)
    return reading


def _gated_by(change: PathChange) -> tuple[str, str]:
    """The (side, folder) whose model_config.yaml gates a file's metrics."""
    return ("base" if change.status == "D" else "head", posixpath.dirname(change.path))


def _below(path: str, root: str) -> str | None:
    if not root:
        return path
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _known(*generations: Generation) -> dict[str, set[str]]:
    """The values the jobs use, so a file name splits as they would render it."""
    sides = {id(g.jobs): g.jobs for g in generations}.values()  # both sides may share them
    jobs = [j for side in sides for j in side]
    names = ("model", "test_case", "environment", "platform")
    known = {k: {getattr(j, k) for j in jobs} for k in names}
    return {**known, "platforms": known["platform"]}


class _Readers:
    """One side's jobs by the golden file each reads, in every target."""

    def __init__(
        self,
        template: ReferenceTemplate,
        generation: Generation,
        targets: Sequence[Named],
        cases: Set[str | None],
    ) -> None:
        """`cases`: the test cases of the files asked about (None: a file
        whose path names none, so every job is looked at)."""
        self.running: dict[str, set[GoldenJob]] = {}
        self.skipped: dict[str, set[GoldenJob]] = {}
        rendered: dict[int, str | None] = {}
        every = None in cases or "test_case" not in template.fields
        for name, target in targets:
            if target is None:
                continue
            selection = generation.selection(target)
            for jobs, into in ((selection.jobs, self.running), (selection.skipped, self.skipped)):
                for job in jobs:
                    if not every and job.test_case not in cases:
                        continue
                    if id(job) not in rendered:
                        rendered[id(job)] = _path(template, job)
                    path = rendered[id(job)]
                    if path is not None:
                        into.setdefault(path, set()).add(
                            GoldenJob(target=name, model=job.model, test_case=job.test_case)
                        )
        self.by_dir = used_by_dir([*self.running, *self.skipped])

    def of(self, rel: str) -> tuple[tuple[GoldenJob, ...], tuple[GoldenJob, ...]]:
        """The jobs that read a file (running, kept out by a skip entry)."""
        path = rel if rel in self.running or rel in self.skipped else variant_of(rel, self.by_dir)
        if path is None:
            return (), ()
        return (
            tuple(sorted(self.running.get(path, ()))),
            tuple(sorted(self.skipped.get(path, ()))),
        )


def _path(template: ReferenceTemplate, job: Job) -> str | None:
    try:
        return reference_path(template, job)
    except TemplateError:
        return None  # a job without a field the template names reads no such file


class _Reading:
    """Each side of each file, each (side, folder)'s gating from its
    model_config.yaml, and the metrics of each file whose sides git gave,
    compared: from git, every size asked and every blob within
    GOLDEN_MAX_BYTES read by one `cat-file` process (`fetch`); the working
    tree's files from disk (`finish`). A head file whose bytes are the base's
    is left out (git's status saw its time change, not its bytes). A config is
    named by its blob id when the diff changed it, else by its folder's tree id
    when the diff gives one (`trees`), else by its path. The configs are asked
    first: a file read as it comes is compared as soon as its sides are there."""

    def __init__(
        self,
        repo: Repository,
        base: str,
        head: str | None,
        found: list[tuple[PathChange, str]],
        known: Mapping[tuple[str, str], str],
        trees: Mapping[str, tuple[str | None, str | None]],
    ) -> None:
        """`found`: each change of a file that fits the template, and its path
        below the template's root."""
        self.repo, self.head, self.found = repo, head, found
        self.changes = changes = [c for c, _ in found]
        self.configs = configs = sorted({_gated_by(c) for c in changes})
        # (side, path, name to ask git, mode)
        self.wanted: list[tuple[str, str, str, str]] = []
        for side, directory in configs:
            commit = base if side == "base" else head
            if commit is not None:
                path = posixpath.join(directory, CONFIG_NAME)
                tree = trees.get(directory, (None, None))[0 if side == "base" else 1]
                name = known.get((side, path)) or (
                    f"{tree}:{CONFIG_NAME}" if tree else f"{commit}:{path}"
                )
                self.wanted.append((f"{side} config", path, name, ""))
        for c in changes:
            if c.status != "A":
                self.wanted.append(("base", c.path, c.old or "", c.old_mode))
            if c.status != "D" and head is not None:
                self.wanted.append(("head", c.path, c.new or "", c.new_mode))
        self.olds: dict[str, GoldenValues] = {}
        self.news: dict[str, GoldenValues] = {}
        self.gating: dict[tuple[str, str], Gating] = {}
        self.compared: dict[str, tuple[MetricChange, ...]] = {}
        self.by_path = {c.path: c for c in changes}
        self.by_gating: dict[tuple[str, str], list[PathChange]] = {}
        for c in changes:
            self.by_gating.setdefault(_gated_by(c), []).append(c)
        # Who reads each blob (a config whose path holds a line break is not read).
        self.users: dict[str, list[tuple[str, str]]] = {}
        for side, path, name, mode in self.wanted:
            if name and mode != _LINK and not (side.endswith("config") and _line_break(path)):
                self.users.setdefault(name, []).append((side, path))
        self.blobs: dict[str, tuple[str, int, bytes | None] | None] = {}

    def fetch(self, *, as_it_comes: bool) -> None:
        """Every blob asked of git (a link's blob, its target's name, never is)."""
        self.blobs = self.repo.small_blobs(
            [name for _, _, name, mode in self.wanted if name and mode != _LINK],
            GOLDEN_MAX_BYTES,
            self._arrived if as_it_comes else None,
        )

    def _arrived(self, name: str, data: bytes) -> None:
        for side, path in self.users.get(name, ()):
            if side.endswith("config"):
                key = (side.split()[0], posixpath.dirname(path))
                self.gating[key] = read_gating(data, path)
                for c in self.by_gating.get(key, ()):
                    self._compare_if_read(c)
            else:
                (self.olds if side == "base" else self.news)[path] = parse_golden(data, path, side)
                self._compare_if_read(self.by_path[path])

    def _compare_if_read(self, c: PathChange) -> None:
        gate = self.gating.get(_gated_by(c))
        if gate is None or (c.status != "A" and c.path not in self.olds):
            return
        if c.status != "D" and (self.head is None or c.path not in self.news):
            return  # the working tree's side is read from disk, later
        old = self.olds.get(c.path) if c.status != "A" else None
        new = self.news.get(c.path) if c.status != "D" else None
        self.compared[c.path] = compare_goldens(old, new, gate.metrics)

    def finish(self) -> list[_Read]:
        """Each file read and compared: every side and gating not read as it
        came read now, what git could not give said, and the working tree's
        side read from disk."""
        olds, news, gating = self.olds, self.news, self.gating
        for side, path, name, mode in self.wanted:
            found = self.blobs.get(name) if name else None
            if side.endswith("config"):
                key = (side.split()[0], posixpath.dirname(path))
                if _line_break(path):
                    gating[key] = unread_gating(path, "its path holds a line break")
                elif found is None:
                    gating[key] = read_gating(None, path)
                elif found[2] is None:
                    gating[key] = unread_gating(path, f"{found[1]:,} bytes")
                elif key not in gating:  # else read as it came
                    gating[key] = read_gating(found[2], path)
                continue
            into = olds if side == "base" else news
            if mode == _LINK:
                into[path] = unreadable(
                    path, side, "golden-read", "it is a symbolic link: not followed"
                )
            elif found is None:
                into[path] = unreadable(path, side, "golden-read", "git holds no file there")
            elif found[2] is None:
                into[path] = too_large(path, side, found[1])
            elif path not in into:  # else read as it came
                into[path] = parse_golden(found[2], path, side)
        if self.head is None:
            for c in self.changes:
                if c.status != "D":
                    _read_worktree(self.repo, c, news)
            for side, directory in self.configs:
                if side == "head":
                    gating[(side, directory)] = _worktree_gating(self.repo, directory)
        out = []
        for change, rel in self.found:
            if change.status != "D" and change.path not in news:
                continue  # the working tree holds what the base holds: git saw its time only
            old = olds.get(change.path) if change.status != "A" else None
            new = news.get(change.path) if change.status != "D" else None
            gate = gating[_gated_by(change)]
            # Compared now where a side was read from disk, or not read at all.
            metrics = self.compared.get(change.path) or compare_goldens(old, new, gate.metrics)
            out.append(_Read(change, rel, old, new, gate, metrics))
        return out


def _line_break(path: str) -> bool:
    return "\n" in path or "\r" in path


def _read_worktree(repo: Repository, change: PathChange, news: dict[str, GoldenValues]) -> None:
    data = _read_disk(repo.top, change.path)
    if isinstance(data, str):
        news[change.path] = unreadable(change.path, "head", "golden-read", data)
    elif data is None:
        news[change.path] = unreadable(change.path, "head", "golden-read", "gone meanwhile")
    elif len(data) > GOLDEN_MAX_BYTES:
        news[change.path] = too_large(change.path, "head", len(data))
    elif change.old is None or blob_id(data, repo.object_format) != change.old:
        news[change.path] = parse_golden(data, change.path, "head")


def _worktree_gating(repo: Repository, directory: str) -> Gating:
    path = posixpath.join(directory, CONFIG_NAME)
    data = _read_disk(repo.top, path)
    if isinstance(data, str):
        return unread_gating(path, data)
    if data is not None and len(data) > GOLDEN_MAX_BYTES:
        return unread_gating(path, f"{len(data):,} bytes or more")
    return read_gating(data, path)


def _read_disk(top: Path, path: str) -> bytes | str | None:
    """A file of the working tree (at most GOLDEN_MAX_BYTES + 1 bytes of it),
    None when there is none, or why it is not read (a link is not followed)."""
    try:
        return read_regular(top / path, limit=GOLDEN_MAX_BYTES)
    except NotRegularFile as exc:
        return f"it is {exc.kind}: not followed"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
