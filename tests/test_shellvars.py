"""Whether a recipe's script hands a variable to its commands, read as the shell
reads it (matrixgen.util.shellvars): scripts built from pieces whose effect is
known, against a model of that effect, and against bash itself."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from matrixgen.quarantine.jobenv import reaches_plugin
from matrixgen.util.shellvars import exported

V = "MATRIXGEN_QUARANTINE"

# Pieces of a script, each with what it does to V at the top level:
# "set" (exported with a value), "assign" (a shell variable, not exported),
# "mark" (export V, with no value), "unset", "prefix" (a command's environment
# prefix: that command gets V), "empty" (exported, empty: no file named), or
# None (nothing: V only mentioned).
PIECES: list[tuple[str, str | None]] = [
    (f"export {V}=/opt/q.yaml MATRIXGEN_SCOPE={{scope}}", "set"),
    (f'export {V}="$HOME/q.yaml"', "set"),
    (f"declare -x {V}=q.yaml", "set"),
    (f"{V}=q.yaml", "assign"),
    (f"export {V}", "mark"),
    (f"unset {V}", "unset"),
    (f"export -n {V}", "unmark"),
    (f"{V}=q.yaml bash run_ci_test.sh", "prefix"),
    (f"# export {V}=q.yaml", None),
    (f"  # {V} is set by the launcher", None),
    (f"echo done  # then; export {V}=q.yaml", None),
    (f'echo "export {V}=q.yaml"', None),
    (f"echo '{V}=q.yaml' >> env.txt", None),
    (f"cat <<EOF > env.sh\nexport {V}=q.yaml\nEOF", None),
    (f"cat <<-'END'\n\texport {V}=q.yaml\n\tEND", None),
    (f"if false; then export {V}=q.yaml; fi", None),
    (f"case $X in\n  a) export {V}=q.yaml;;\nesac", None),
    (f"f() {{\n  export {V}=q.yaml\n}}", None),
    (f"( export {V}=q.yaml )", None),
    (f"x=$(export {V}=q.yaml; echo)", None),
    (f"export {V}=", "empty"),
    (f"export {V}=''", "empty"),
    (f"export {V}_OLD=q.yaml", None),
    (f"export X{V}=q.yaml", None),
    (f"bash -c 'export {V}=q.yaml'", None),
    ("set -euo pipefail", None),
    ('rm -f "${{HOME}}/.netrc"', None),
    ("y=$((1<<2))", None),
    ("cat <<<'here string'", None),
]


def model(pieces: list[tuple[str, str | None]]) -> bool:
    """Does V reach the commands at the end (or reach one through a prefix)?"""
    value = marked = prefixed = False
    for _, effect in pieces:
        if effect == "set":
            value = marked = True
        elif effect == "assign":
            value = True
        elif effect == "empty":
            value, marked = False, True
        elif effect == "mark":
            marked = True
        elif effect == "unset":
            value = marked = False
        elif effect == "unmark":
            marked = False
        elif effect == "prefix":
            prefixed = True
    return (value and marked) or prefixed


SCRIPTS = st.lists(st.sampled_from(PIECES), max_size=6)


@given(pieces=SCRIPTS, separator=st.sampled_from(["\n", "\n\n", "\n  \n"]))
@example(pieces=[PIECES[8]], separator="\n")  # a comment naming the variable
@example(pieces=[PIECES[10]], separator="\n")  # a comment after a command, with a `;`
@example(pieces=[PIECES[11]], separator="\n")  # an echo of the line
@example(pieces=[PIECES[13]], separator="\n")  # a here-document holding it
@example(pieces=[PIECES[15]], separator="\n")  # inside an if
@example(pieces=[PIECES[0], PIECES[5]], separator="\n")  # exported, then unset
@example(pieces=[PIECES[3], PIECES[4]], separator="\n")  # assigned, then exported
@example(pieces=[PIECES[4], PIECES[3]], separator="\n")  # exported first, assigned after
@example(pieces=[PIECES[20]], separator="\n")  # an empty value
@example(pieces=[PIECES[22]], separator="\n")  # a longer name
@example(pieces=[PIECES[7]], separator="\n")  # an environment prefix
@example(pieces=[PIECES[28], PIECES[0]], separator="\n")  # a here-string is no here-document
def test_a_script_reaches_the_plugin_only_when_the_shell_would_export_it(
    pieces: list[tuple[str, str | None]], separator: str
) -> None:
    script = separator.join(text for text, _ in pieces)
    assert reaches_plugin(script) is model(pieces), script


def test_a_script_the_shell_cannot_read_hands_nothing_on() -> None:
    for script in (f"echo 'open\nexport {V}=q", f"cat <<EOF\nexport {V}=q", f'x="$(\nexport {V}=q'):
        assert exported(script) == {}, script


def test_quotes_across_lines_and_continuations_are_read_whole() -> None:
    assert reaches_plugin(f'echo "a\nb"\nexport {V}=q')
    assert reaches_plugin(f"export \\\n  {V}=q")
    assert not reaches_plugin(f"echo 'a\nexport {V}=q'")


def test_an_escaped_closing_character_does_not_end_an_ansi_string_or_a_backquote() -> None:
    assert reaches_plugin(f"echo $'a\\' b'; export {V}=q")
    assert reaches_plugin(f"echo `echo a\\` b`; export {V}=q")


def test_the_cost_is_linear_in_the_script() -> None:
    import time

    script = "echo 'open" + "\nx" * 200_000  # a quote that never closes
    start = time.process_time()
    assert exported(script) == {}
    script = f"export {V}=q\n" + 'echo "a"; y=$(b) # c\n' * 50_000
    assert reaches_plugin(script)
    assert time.process_time() - start < 10


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@settings(max_examples=60)
@given(pieces=SCRIPTS)
def test_bash_agrees_where_the_reading_says_the_variable_reaches(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[tuple[str, str | None]]
) -> None:
    """Whatever the reading says is exported, bash exports (it may say less: it
    is conservative, never more)."""
    pieces = [(t.replace("bash run_ci_test.sh", "true"), e) for t, e in pieces if "set -e" not in t]
    script = "\n".join(text for text, _ in pieces)
    probe = script + f'\nprintf %s "${{{V}+set}}:$(env | grep -c "^{V}=")"\n'
    done = subprocess.run(
        ["bash", "-c", probe],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "X": "b"},
        cwd=tmp_path_factory.mktemp("bash"),
        check=False,
        timeout=30,
    )
    exported_by_bash = done.stdout.rsplit("\n", 1)[-1].endswith(":1")
    said = dict(exported(script)).get(V)
    prefixed = any(effect == "prefix" for _, effect in pieces)
    if said and not prefixed:
        assert exported_by_bash, (script, done.stdout, done.stderr)
