"""How a trigger decision reads: a table for the terminal, Markdown for a job
summary, and the outputs `decide --github-output` writes."""

from __future__ import annotations

from typing import Any

from matrixgen.model.decide import ANY_CADENCE, Decision
from matrixgen.util.escape import markdown_code, markdown_text, terminal_text
from matrixgen.util.values import json_value
from matrixgen.views.table import Column, Report, table


def fields(decision: Decision) -> Report:
    """Each field, its value and the rule that decided it, in display order."""
    by = decision.set_by
    cadence = decision.cadence if decision.cadence is not None else f"{ANY_CADENCE} (bypassed)"
    n_repeat = str(decision.n_repeat) if decision.n_repeat is not None else "recipes' own"
    rows = [
        ("scope", decision.scope),
        ("cadence", cadence),
        ("environment", decision.environment or "each target's own"),
        ("n_repeat", n_repeat),
        ("lightweight", "yes" if decision.lightweight else "no"),
    ]
    columns = [Column("field", escape=str), Column("value"), Column("rule")]
    return Report(columns, [(f, v, by.get(f, "")) for f, v in rows])


def render_table(decision: Decision) -> str:
    labels = ", ".join(terminal_text(label) for label in decision.labels) or "none"
    head = f"{decision.system.value} event {terminal_text(decision.event)}, labels: {labels}\n"
    if decision.ignored_labels:
        ignored = ", ".join(terminal_text(label) for label in decision.ignored_labels)
        head += f"ignored labels (no rule names them): {ignored}\n"
    body = fields(decision).text()
    names = [
        [t.name, t.selector.platform or "", t.selector.environment or ""] for t in decision.targets
    ]
    targets = table(names, ["target", "platform", "environment"]) if names else "no targets\n"
    return head + "\n" + body + "\n" + targets


def render_markdown(decision: Decision) -> str:
    # Labels and the event come from a pull request: escaped for a table cell.
    labels = ", ".join(markdown_text(label) for label in decision.labels) or "none"
    lines = [
        f"### matrixgen decision: {decision.system.value} event {markdown_text(decision.event)}",
        "",
        f"Labels: {labels}.",
        "",
        *fields(decision).markdown(),
        "",
        f"**{len(decision.targets)} target(s):** "
        + (", ".join(markdown_code(t.name) for t in decision.targets) or "none"),
    ]
    if decision.ignored_labels:
        ignored = ", ".join(markdown_text(label) for label in decision.ignored_labels)
        lines += ["", f"Ignored labels (no rule names them): {ignored}."]
    return "\n".join(lines) + "\n"


def github_outputs(decision: Decision) -> list[tuple[str, str]]:
    """Step outputs: each decided field, and the targets as a JSON list."""
    from matrixgen.emit.registry import step_outputs

    compact = step_outputs().compact  # the JSON spelling every step output has
    data: dict[str, Any] = json_value(decision)
    return [
        ("scope", decision.scope),
        ("cadence", data["cadence"]),
        ("environment", decision.environment or ""),
        ("n_repeat", str(decision.n_repeat) if decision.n_repeat is not None else ""),
        ("lightweight", "true" if decision.lightweight else "false"),
        ("targets", compact(data["targets"])),
        ("decision", compact(data)),
    ]
