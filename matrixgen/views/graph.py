"""The job graph: edges run from what must come first (a build image, a job a
recipe's `spec.needs` names, a target's warm-up job, the parent pipeline's job)
to what waits for it. A need resolves inside one target (a child pipeline can
only wait for its own jobs) or against `graph.external.<system>`. networkx is
imported only here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, contains
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

from matrixgen.documents.config import ProjectConfig
from matrixgen.emit.common import Waits, emitted_jobs, warmup_index
from matrixgen.emit.registry import emitter_for
from matrixgen.model.errors import Finding, Location, Severity, finding
from matrixgen.model.jobs import Job, Target, spec_needs
from matrixgen.model.vocab import System
from matrixgen.util import jsontext
from matrixgen.util.escape import json_for_log, terminal_text
from matrixgen.util.values import json_value
from matrixgen.views.table import few

if TYPE_CHECKING:
    import networkx as nx

    from matrixgen.engine.context import ValidationContext
    from matrixgen.pipeline import Generation

KIND_ORDER = {"parent": 0, "build": 1, "external": 2, "job": 3, "missing": 4}


class Need(Struct, frozen=True):
    """One need of one job: the job it names, at its position in spec.needs."""

    job: Job
    name: str
    index: int


class JobGraph(Struct):
    """A graph with what building it found."""

    graph: nx.DiGraph
    target: Target | None
    missing: list[Need] = field(default_factory=list)
    cycles: list[list[str]] = field(default_factory=list)


def job_node(job: Job) -> str:
    return f"job:{job.name}"


def build_node(job: Job, config: ProjectConfig) -> str | None:
    if not job.build:
        return None
    arch = config.platform(job.platform).arch
    return f"build:{job.build}" + (f"@{arch}" if arch is not None else "")


def build_graph(
    jobs: Iterable[Job], config: ProjectConfig, target: Target | None = None
) -> JobGraph:
    """The graph of some jobs: one target's selection, or (target None) a whole
    tree, where needs resolve against every job and no settings apply."""
    import networkx as nx

    jobs = sorted(jobs, key=Job.sort_key)
    graph = nx.DiGraph()
    result = JobGraph(graph=graph, target=target)
    by_name: dict[str, Job] = {}
    for job in jobs:
        node = job_node(job)
        if node in graph:
            scopes = graph.nodes[node]["scopes"]
            if job.scope and job.scope not in scopes:
                scopes.append(job.scope)
            continue
        by_name.setdefault(job.name, job)
        graph.add_node(
            node,
            kind="job",
            label=job.name,
            model=job.model,
            test_case=job.test_case,
            platform=job.platform,
            environment=job.environment,
            tag=job.tag,
            scopes=[job.scope] if job.scope else [],
            quarantine=job.quarantine.action if job.quarantine else None,
        )
        build = build_node(job, config)
        if build is not None:
            if build not in graph:
                graph.add_node(build, kind="build", label=build.removeprefix("build:"))
            graph.add_edge(build, node, kind="build")
    external = config.doc.graph.external
    externals = (
        set(external.get(target.system, ()))
        if target is not None
        else {name for names in external.values() for name in names}
    )
    for job in jobs:
        for index, name in spec_needs(job):
            if name in by_name:
                graph.add_edge(job_node(by_name[name]), job_node(job), kind="needs")
                continue
            kind = "external" if name in externals else "missing"
            graph.add_node(f"{kind}:{name}", kind=kind, label=name)
            graph.add_edge(f"{kind}:{name}", job_node(job), kind="needs")
            if kind == "missing":
                result.missing.append(Need(job=job, name=name, index=index))
    waits = emitter_for(target.system).waits(target.settings) if target is not None else Waits()
    if waits.warmup and len(emitted := emitted_jobs(jobs)) > 1:
        # The first job the emitter writes that may not fail runs before the others.
        warm = job_node(emitted[warmup_index(emitted)])
        graph.nodes[warm]["warmup"] = True
        for job in jobs:
            if job_node(job) != warm and (
                job.quarantine is None or job.quarantine.action != "skip"
            ):
                graph.add_edge(warm, job_node(job), kind="warmup")
    if waits.parent_job is not None:
        node = f"parent:{waits.parent_job}"
        graph.add_node(node, kind="parent", label=waits.parent_job)
        for job in jobs:
            graph.add_edge(node, job_node(job), kind="parent")
    result.cycles = _cycles(graph)
    return result


def _cycles(graph: nx.DiGraph) -> list[list[str]]:
    """One cycle per strongly connected component, or a self-loop: enough to name
    what to fix without listing every circuit. A cycle is a real circuit, in the
    order of its edges (what comes first, then what waits for it), starting at
    its least node, so that `a -> b -> c -> a` reads as the jobs wait."""
    import networkx as nx

    cycles = []
    for component in nx.strongly_connected_components(graph):
        if len(component) < 2:
            continue
        edges = nx.find_cycle(graph.subgraph(component), source=min(component))
        circuit = [a for a, _ in edges]
        start = circuit.index(min(circuit))
        cycles.append(circuit[start:] + circuit[:start])
    cycles += [[node] for node in nx.nodes_with_selfloops(graph)]
    return sorted(cycles)


def target_graph(generation: Generation, target: Target) -> JobGraph:
    """One target's graph: its selection after quarantine (skipped jobs absent)."""
    return build_graph(generation.jobs_for(target), generation.tree.config, target)


def tree_graph(generation: Generation) -> JobGraph:
    return build_graph(generation.jobs, generation.tree.config, None)


def _any_needs(jobs: Sequence[Job]) -> bool:
    """`any(spec_needs(j) for j in jobs)`: a needs list with a template in it
    (whether it renders or not), tested in C for the jobs without one."""
    specs = list(map(attrgetter("spec"), jobs))
    needs = (s["needs"] for s in compress(specs, map(contains, specs, repeat("needs"))))
    return any(isinstance(n, list) and any(isinstance(t, str) for t in n) for n in needs)


def check_graph(context: ValidationContext) -> Iterator[Finding]:
    """validate: needs that resolve to no job in a target, and cycles."""
    if not _any_needs(context.expansion.jobs):
        return  # warm-up and parent edges alone can neither dangle nor close a cycle
    generation = context.generation
    config = context.tree.config
    missing: dict[tuple[Location, str], list[str]] = {}
    cycles: dict[tuple[str, ...], tuple[Location, list[str]]] = {}
    # Needs a matrix cannot keep, by the matrix's system.
    row_needs: dict[tuple[System, Location], list[str]] = {}
    files = {f.rel: f for f in context.tree.files}

    def locate(job: Job, index: int) -> Location:
        """spec.needs[i] of the job's recipe, else the job's row."""
        recipe = files.get(job.recipe)
        return job.source if recipe is None else recipe.document.locate(["spec", "needs", index])

    for target in context.targets:
        selection = generation.selection(target)
        skipped_names = {j.name: j for j in selection.skipped}
        result = build_graph(selection.jobs, config, target)
        for need in result.missing:
            where = locate(need.job, need.index)
            mark = skipped_names[need.name].quarantine if need.name in skipped_names else None
            why = f" (quarantine {mark.id} {mark.tracker} skips it)" if mark is not None else ""
            missing.setdefault((where, need.name), []).append(target.name + why)
        for cycle in result.cycles:
            key = tuple(cycle)
            if key not in cycles:
                first = next((n for n in cycle if n.startswith("job:")), cycle[0])
                job = result.graph.nodes[first].get("label", first)
                jobs = [j for j in selection.jobs if j.name == job]
                where = jobs[0].source if jobs else Location(config.path)
                cycles[key] = (where, [])
            cycles[key][1].append(target.name)
        if not emitter_for(target.system).child_pipelines:  # rows cannot wait
            for job in selection.jobs:
                for index, _ in spec_needs(job):
                    where = locate(job, index)
                    row_needs.setdefault((target.system, where), []).append(target.name)
    for (where, name), in_targets in sorted(missing.items()):
        yield finding(
            where,
            "graph-missing",
            f'needs "{name}", which is no job of target(s) {few(in_targets, 4)}',
        )
    for cycle, (where, in_targets) in sorted(cycles.items(), key=lambda kv: kv[1][0]):
        path = " -> ".join(n.split(":", 1)[1] for n in (*cycle, cycle[0]))
        yield finding(
            where, "graph-cycle", f"jobs wait for each other: {path} (in {few(in_targets, 4)})"
        )
    for (system, where), in_targets in sorted(row_needs.items()):
        yield finding(
            where,
            f"graph-{system.value}-needs",
            f"the rows of a {system.label} matrix cannot wait for each other; "
            f"these needs are not kept in {few(in_targets, 4)}",
            Severity.WARNING,
        )


def _sorted_nodes(graph: nx.DiGraph) -> list[str]:
    return sorted(graph.nodes, key=lambda n: (KIND_ORDER.get(graph.nodes[n]["kind"], 9), n))


def to_json(result: JobGraph) -> dict[str, Any]:
    graph = result.graph
    nodes = []
    for node in _sorted_nodes(graph):
        attrs = {k: v for k, v in sorted(graph.nodes[node].items()) if v is not None}
        nodes.append({"id": node, **attrs})
    edges = [
        {"from": a, "to": b, "kind": graph.edges[a, b]["kind"]} for a, b in sorted(graph.edges)
    ]
    return {
        "target": (
            {"name": result.target.name, **json_value(result.target.place)}
            if result.target
            else None
        ),
        "nodes": nodes,
        "edges": edges,
        "missing": [
            {"job": n.job.name, "needs": n.name, "recipe": n.job.recipe}
            for n in sorted(result.missing, key=lambda n: (n.job.name, n.name))
        ],
        "cycles": result.cycles,
    }


# The mermaid class of each kind of node (and of the warm-up job), in the order written.
MERMAID_STYLES = {
    "build": "fill:#e8f0fe,stroke:#4a6fa5",
    "parent": "fill:#f3e8fd,stroke:#7a4aa5",
    "missing": "fill:#fde8e8,stroke:#c0392b,stroke-dasharray:4",
    "external": "fill:#f0f0f0,stroke:#777",
    "warmup": "fill:#fff4d6,stroke:#b8860b",
}

# What a label of each kind of node begins with (a job's ends with its quarantine).
MERMAID_PREFIXES = {"build": "build ", "parent": "parent pipeline: ", "missing": "MISSING "}


def to_mermaid(result: JobGraph) -> str:
    graph = result.graph
    order = {node: i for i, node in enumerate(_sorted_nodes(graph))}
    ids = {node: f"n{i}" for node, i in order.items()}
    lines = ["flowchart LR"]
    classes: dict[str, list[str]] = {name: [] for name in MERMAID_STYLES}
    for node, nid in ids.items():
        attrs = graph.nodes[node]
        label = attrs["label"]
        kind = attrs["kind"]
        if kind in classes:
            classes[kind].append(nid)
        if attrs.get("warmup"):
            classes["warmup"].append(nid)
        if kind in MERMAID_PREFIXES:
            label = MERMAID_PREFIXES[kind] + label
        elif attrs.get("quarantine"):
            label = f"{label} ({attrs['quarantine']})"
        shape = ('[("', '")]') if kind == "build" else ('["', '"]')
        # Inside ["..."] a double quote ends the label; mermaid reads #quot; as one.
        # A line break would end the statement: labels are one line, shown escaped.
        label = terminal_text(label).replace('"', "#quot;")
        lines.append(f"  {nid}{shape[0]}{label}{shape[1]}")
    for a, b in sorted(graph.edges, key=lambda e: (order[e[0]], order[e[1]])):
        arrow = "-.->" if graph.edges[a, b]["kind"] in ("parent", "build") else "-->"
        lines.append(f"  {ids[a]} {arrow} {ids[b]}")
    for name, members in classes.items():
        if members:
            lines.append(f"  classDef {name} {MERMAID_STYLES[name]}")
            lines.append(f"  class {','.join(members)} {name}")
    return "\n".join(lines) + "\n"


def _dot_quote(text: str) -> str:
    # One line whatever the text holds: DOT reads \n in a label as a line break.
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r", "\\r").replace("\n", "\\n") + '"'


def to_dot(result: JobGraph) -> str:
    graph = result.graph
    name = result.target.name if result.target else "recipes"
    lines = [f"digraph {_dot_quote(name)} {{", "  rankdir=LR;", "  node [shape=box];"]
    shapes = {"build": "cylinder", "parent": "component", "missing": "octagon", "external": "box"}
    for node in _sorted_nodes(graph):
        attrs = graph.nodes[node]
        extra = f", shape={shapes[attrs['kind']]}" if attrs["kind"] in shapes else ""
        if attrs["kind"] == "missing":
            extra += ", color=red"
        if attrs.get("warmup"):
            extra += ", style=bold"
        lines.append(f"  {_dot_quote(node)} [label={_dot_quote(attrs['label'])}{extra}];")
    for a, b in sorted(graph.edges):
        style = ", style=dashed" if graph.edges[a, b]["kind"] in ("parent", "build") else ""
        lines.append(
            f"  {_dot_quote(a)} -> {_dot_quote(b)} [label={_dot_quote(graph.edges[a, b]['kind'])}"
            f"{style}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_graph(result: JobGraph, fmt: str) -> str:
    if fmt == "json":
        return json_for_log(jsontext.pretty(to_json(result)))
    return to_dot(result) if fmt == "dot" else to_mermaid(result)


def summary(result: JobGraph) -> Mapping[str, int]:
    kinds = Counter(kind for _, kind in result.graph.nodes(data="kind"))
    return {**kinds, "edges": result.graph.number_of_edges()}
