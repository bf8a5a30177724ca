"""The slow shell examples of README.md and docs/*.md (`<!-- example: slow -->`: real verifications, in
containers where the page says so) run as they are written; tests/doc_examples.py says how."""

from __future__ import annotations

import doc_examples
import pytest
from doc_examples import Example, Workspaces

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Workspaces:
    return Workspaces(tmp_path_factory.mktemp("doc-examples"))


@pytest.mark.parametrize(
    "example", [pytest.param(example, id=where) for where, example in doc_examples.params(slow=True)]
)
def test_slow_example(example: Example, workspaces: Workspaces) -> None:
    reason = workspaces.run(example)
    if reason is not None:
        pytest.fail(reason, pytrace=False)
