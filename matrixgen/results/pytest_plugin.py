"""pytest plugin: a job's node-level quarantine entries, applied in its test process.

Registered through the `pytest11` entry point, so it loads in every pytest run
where matrixgen is installed: it does nothing unless MATRIXGEN_QUARANTINE names
the quarantine file, and importing it imports nothing else of matrixgen.
What deselect and mute do, and how xdist workers report: docs/pytest-plugin.md.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from matrixgen.quarantine.jobenv import JobQuarantine
    from matrixgen.quarantine.model import Entry

# matrixgen.quarantine.jobenv.QUARANTINE_VARIABLE, spelt out so that a run
# without it imports nothing (a test checks the two agree).
QUARANTINE_VARIABLE = "MATRIXGEN_QUARANTINE"
PLUGIN_NAME = "matrixgen-quarantine-job"
MUTED = "muted"
# What each pytest-xdist worker hands its controller (config.workeroutput):
# the controller collects nothing itself, and prints the section.
WORKER_OUTPUT = "matrixgen_quarantine"


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get(QUARANTINE_VARIABLE, "").strip():
        return
    from matrixgen.model.errors import MatrixgenError
    from matrixgen.quarantine.jobenv import IdentityError, QuarantineFileError, load_job_quarantine

    try:
        quarantine = load_job_quarantine(os.environ)
    except (IdentityError, QuarantineFileError, MatrixgenError) as exc:
        raise pytest.UsageError(f"matrixgen quarantine: {exc}") from None
    if quarantine is None:
        return
    plugin = NodeQuarantine(quarantine, maxfail=config.option.maxfail or 0)
    if plugin.mutes:
        # --maxfail (and -x) must not count muted failures: the plugin counts
        # the failures itself and stops the run as pytest would.
        config.option.maxfail = 0
    config.pluginmanager.register(plugin, PLUGIN_NAME)


class NodeQuarantine:
    """The hooks, once a job's quarantine is loaded."""

    def __init__(self, quarantine: JobQuarantine, *, maxfail: int = 0) -> None:
        from matrixgen.model.vocab import QuarantineAction

        self.quarantine = quarantine
        self.decides = quarantine.node_actions()
        self.mutes = any(e.action is QuarantineAction.MUTE for e in self.decides.values())
        self.maxfail = maxfail
        self.failures = 0  # the run's failures that count
        self.session: pytest.Session | None = None
        self.deselected: list[str] = []
        self.unmatched: list[tuple[Entry, str]] = []
        self.muted_failed: dict[str, tuple[Entry, str]] = {}  # node id -> (entry, message)
        self.muted_passed: set[str] = set()

    def entry_for(self, node_id: str) -> Entry | None:
        """The entry that decides a test (`util.nodeid.covers`: its own id, or
        the function it parametrises; never a prefix)."""
        from matrixgen.util.nodeid import decider

        return decider(self.decides, node_id)

    def muting(self, node_id: str) -> Entry | None:
        from matrixgen.model.vocab import QuarantineAction

        entry = self.entry_for(node_id)
        return entry if entry is not None and entry.action is QuarantineAction.MUTE else None

    # ------------------------------------------------------------------ hooks

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        q = self.quarantine
        applies = ", ".join(
            f"{e.id} ({e.action.value}, {len(e.node_ids)} node id(s))" for e in q.entries
        )
        return [
            f"matrixgen quarantine: {q.path} for {q.identity}",
            f"  applies: {applies}" if applies else "  no node-level entry applies to this job",
            *_expired_lines(q.expired),
            *_undecided_lines(q.undecided),
        ]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        from matrixgen.model.vocab import QuarantineAction
        from matrixgen.util.nodeid import base_id

        matched: set[str] = set()
        kept: list[pytest.Item] = []
        removed: list[pytest.Item] = []
        for item in items:
            node_id = item.nodeid
            entry = self.entry_for(node_id)
            if entry is not None:
                matched.add(node_id if node_id in self.decides else base_id(node_id) or node_id)
                if entry.action is QuarantineAction.DESELECT:
                    removed.append(item)
                    continue
                item.user_properties.extend(
                    [
                        ("quarantined", entry.id),
                        ("quarantine_tracker", entry.tracker_ref),
                        ("quarantine_action", entry.action.value),
                    ]
                )
            kept.append(item)
        if removed:
            items[:] = kept
            config.hook.pytest_deselected(items=removed)
            self.deselected = [i.nodeid for i in removed]
        for entry in self.quarantine.entries:
            for node in entry.node_ids:
                if node not in matched and self.decides.get(node) is entry:
                    self.unmatched.append((entry, node))
                    _warn_unmatched(entry, node, self.quarantine.path)
        worker_output = getattr(config, "workeroutput", None)
        if worker_output is not None:  # a pytest-xdist worker: for the controller
            worker_output[WORKER_OUTPUT] = {
                "deselected": list(self.deselected),
                "unmatched": [[e.id, n] for e, n in self.unmatched],
            }

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist's controller, as each worker ends: what it deselected
        and which node ids it found no test for (every worker collects every
        test, so each is counted once)."""
        found = (getattr(node, "workeroutput", None) or {}).get(WORKER_OUTPUT)
        if not isinstance(found, dict):
            return
        by_id = {e.id: e for e in self.quarantine.entries}
        seen = set(self.deselected)
        self.deselected += [n for n in found.get("deselected", ()) if n not in seen]
        known = {(e.id, n) for e, n in self.unmatched}
        for entry_id, node in found.get("unmatched", ()):
            entry = by_id.get(entry_id)
            if entry is not None and (entry_id, node) not in known:
                known.add((entry_id, node))
                self.unmatched.append((entry, node))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        session = self.session
        entry = self.muting(report.nodeid)
        if report.failed and entry is not None:
            # Not one of the run's failures: the exit status does not count it
            # (the session counted it just before, tryfirst).
            if session is not None and session.testsfailed > 0:
                session.testsfailed -= 1
            self.muted_failed.setdefault(report.nodeid, (entry, _message(report)))
            return
        if entry is not None and report.when == "call" and report.passed:
            self.muted_passed.add(report.nodeid)
        if report.failed and not hasattr(report, "wasxfail") and self.mutes:
            self.failures += 1
            if self.maxfail and self.failures >= self.maxfail and session is not None:
                session.shouldfail = f"stopping after {self.failures} failures"

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        if report.failed and self.muting(report.nodeid) is not None:
            return MUTED, "M", ("MUTED", {"yellow": True})
        return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        lines: list[str] = []
        for node, (entry, message) in self.muted_failed.items():
            tail = f": {message}" if message else ""
            lines.append(f"MUTED {node} (entry {entry.id}, {entry.tracker_ref}){tail}")
        if self.muted_failed:
            lines.append(
                f"{len(self.muted_failed)} muted test(s) failed; the run does not fail for them"
            )
        passed = self.muted_passed - set(self.muted_failed)
        if passed:
            lines.append(f"{len(passed)} muted test(s) passed")
        if self.deselected:
            lines.append(f"{len(self.deselected)} test(s) deselected by quarantine entries")
        for entry, node in self.unmatched:
            lines.append(
                f"entry {entry.id} ({entry.action.value}): {node} matches no collected test"
            )
        lines.extend(_expired_lines(self.quarantine.expired))
        lines.extend(_undecided_lines(self.quarantine.undecided))
        if lines:
            terminalreporter.section("matrixgen quarantine", sep="-", yellow=True)
            for line in lines:
                terminalreporter.line(line)


def _warn_unmatched(entry: Entry, node: str, path: str) -> None:
    """A PytestWarning at the entry's place in the quarantine file, shown in
    pytest's warnings summary, and never an error: under `-W error` or
    `filterwarnings = error` pytest would stop the whole run at collection
    (INTERNALERROR, no test run) for a stale node id, which the section reports
    anyway. So it is issued under a filter of its own that lets it through."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", pytest.PytestWarning)
        warnings.warn_explicit(
            f"matrixgen quarantine: entry {entry.id} ({entry.action.value}) names "
            f"{node}, which matches no collected test",
            pytest.PytestWarning,
            filename=entry.location.file or path,
            lineno=entry.location.line or 1,
        )


def _undecided_lines(entries: Sequence[Entry]) -> list[str]:
    from matrixgen.systems.ci import job_variables

    return [
        f"entry {e.id} ({e.action.value}) applies on {', '.join(e.where)} only, and "
        f"MATRIXGEN_SYSTEM is not set (nor {' or '.join(job_variables())}): not applied"
        for e in entries
    ]


def _expired_lines(entries: Sequence[Entry]) -> list[str]:
    return [
        f"entry {e.id} ({e.action.value}) expired on {e.expires}: no longer applied "
        "(lift or extend it)"
        for e in entries
    ]


def _message(report: pytest.TestReport) -> str:
    """The first line of a failure's message (the JUnit XML keeps all of it)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = getattr(crash, "message", None) or str(report.longrepr or "")
    return (text.strip().splitlines() or [""])[0][:200]
