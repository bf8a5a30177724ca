"""The shell examples of README.md and docs/*.md run as they are written (the fast ones; the slow ones run
with the integration tests), and every page keeps to the convention tests/doc_examples.py describes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import doc_examples
import pytest
from doc_examples import Example, Workspaces


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Workspaces:
    return Workspaces(tmp_path_factory.mktemp("doc-examples"))


def _params() -> list[object]:
    return [
        pytest.param(
            example,
            id=where,
            marks=[pytest.mark.skip(reason=f"{where}: {example.skip}")] if example.skip else [],
        )
        for where, example in doc_examples.params(slow=False)
    ]


@pytest.mark.parametrize("example", _params())
def test_example(example: Example, workspaces: Workspaces) -> None:
    reason = workspaces.run(example)
    if reason is not None:
        pytest.fail(reason, pytrace=False)


@pytest.mark.parametrize(
    "path", doc_examples.documents(), ids=lambda path: path.relative_to(doc_examples.ROOT).as_posix()
)
def test_every_shell_example_is_a_console_block_the_tests_read(path: Path) -> None:
    assert doc_examples.convention_problems(path) == []


def test_wildcards_stand_for_lines_and_for_text_within_a_line() -> None:
    printed = "reprobox: run 1/2\nepoch 1\nbit-identical: 2 runs\n  run /tmp/x/runs/job/2026-1a2b\n"
    assert doc_examples.output_matches(["...", "bit-identical: 2 runs", "  run .../runs/job/..."], printed)
    assert doc_examples.output_matches(["reprobox: run 1/2", "...", "  run ..."], printed)
    assert not doc_examples.output_matches(["bit-identical: 2 runs", "..."], printed)  # not the first line
    assert not doc_examples.output_matches(["...", "bit-identical: 3 runs", "..."], printed)
    assert not doc_examples.output_matches(["...", "  run .../runs/other/..."], printed)
    # `...` within a line never reaches into the next one
    assert not doc_examples.output_matches(["reprobox: ... 2 runs", "..."], printed)


def test_spacing_and_trailing_blank_lines_do_not_count_but_every_line_does() -> None:
    assert doc_examples.output_matches(["a  b", "c", ""], "a b   \nc\n\n\n")
    assert not doc_examples.output_matches(["a b"], "a b\nc\n")
    assert not doc_examples.output_matches(["a b", "c"], "a b\n")


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent(text))
    return page


def test_a_page_is_read_into_commands_outputs_and_directives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doc_examples, "ROOT", tmp_path)
    page = _page(
        tmp_path,
        """\
        # A page

        ```console
        $ echo one \\
          two
        one two
        $ true
        ```

        1. In a list:

           <!-- example: slow continues -->
           ```console
           $ echo three
           three
           ```

        <!-- example: skip needs a GPU -->
        ```console
        $ nvidia-smi
        ```

        <!-- example: cwd=sub continues -->
        ```console
        $ pwd
        ```
        """,
    )
    (tmp_path / "sub").mkdir()
    first, second, third, fourth = doc_examples.examples(page)
    assert first.where == "page.md:3"
    assert [(c.text, c.line, c.expected) for c in first.commands] == [
        ("echo one \\\n  two", 4, ("one two",)),
        ("true", 7, None),
    ]
    assert (second.where, second.slow, second.continues, second.commands[0].expected) == (
        "page.md:13",
        True,
        first,
        ("three",),
    )
    assert (third.skip, third.commands[0].text) == ("needs a GPU", "nvidia-smi")
    assert (fourth.cwd, fourth.continues, second.cwd) == ("sub", second, ".")
    assert doc_examples.convention_problems(page) == []


def test_shell_outside_console_blocks_and_unknown_directives_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doc_examples, "ROOT", tmp_path)
    page = _page(
        tmp_path,
        """\
        ```sh
        reprobox verify job.yaml
        ```

        ```
        plain
        ```

        ```text
        $ reprobox hash model.pt
        ```

        <!-- example: quick -->
        ```console
        output first
        $ true
        ```

        <!-- example: skip -->
        ```console
        $ true
        ```
        """,
    )
    assert doc_examples.convention_problems(page) == [
        "page.md:1: a ```sh block: write shell examples as ```console",
        "page.md:5: a fenced block with no language (```text for plain text)",
        "page.md:9: `$ ` commands in a ```text block: use ```console",
        "page.md:14: output before the first `$ ` command (line 15)",
        "page.md:14: unknown example directive ['quick']",
        "page.md:20: `example: skip` needs a reason",
    ]


def test_a_failing_command_is_named_with_its_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doc_examples, "ROOT", tmp_path)
    monkeypatch.setattr(doc_examples, "copy_repository", lambda dest: dest)
    page = _page(
        tmp_path,
        """\
        ```console
        $ cd /; pwd
        /
        $ echo printed
        shown
        ```

        ```console
        $ false
        $ echo never
        ```

        ```console
        $ exit 3; echo "exit $?"
        ```
        """,
    )
    matching, wrong, failing = doc_examples.examples(page)
    runs = Workspaces(tmp_path)
    assert runs.run(matching) == (
        "page.md:4: `echo printed` printed what the example does not show\n"
        "---- the example shows\nshown\n---- it printed\nprinted"
    )
    assert runs.run(wrong) == "page.md:9: `false` exited 1:\n"
    assert runs.run(failing) is not None


def test_an_example_that_continues_runs_where_the_one_before_left_even_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doc_examples, "ROOT", tmp_path)
    (tmp_path / "sub").mkdir()
    monkeypatch.setattr(doc_examples, "copy_repository", lambda dest: (dest / "sub").mkdir() or dest)
    page = _page(
        tmp_path,
        """\
        <!-- example: cwd=sub -->
        ```console
        $ echo written > note.txt
        ```

        <!-- example: continues -->
        ```console
        $ cat note.txt; basename "$PWD"
        written
        sub
        ```
        """,
    )
    first, second = doc_examples.examples(page)
    assert Workspaces(tmp_path / "alone").run(second) is None  # runs `first` before it
    runs = Workspaces(tmp_path / "together")
    assert runs.run(first) is None
    assert runs.run(second) is None
    assert len(list((tmp_path / "together").glob("example-*"))) == 1
