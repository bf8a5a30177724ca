"""A docker SDK client that only raises or streams what a test gives it, and the SDK's own errors.

For the engine's error translation alone: what the engine does is tested against a real one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import docker.errors
import requests
import requests.exceptions

from reprobox import engine

START = "start one with: sudo systemctl start docker"
CHECK = "check the Docker engine (docker info)"
GPU_WORDS = 'could not select device driver "" with capabilities: [[gpu]]'


def response(status: int) -> requests.Response:
    answer = requests.Response()
    answer.status_code = status
    answer.url = "http+docker://localhost/v1.47/anything"
    answer.reason = "Some Reason"
    return answer


def api_error(
    status: int, explanation: str, cls: type[docker.errors.APIError] = docker.errors.APIError
) -> Any:
    return cls(f"{status} error", response=response(status), explanation=explanation)


def refused_connection() -> requests.exceptions.ConnectionError:
    return requests.exceptions.ConnectionError(
        "('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))"
    )


class Calls:
    """Stands in for `client.api` / `client.containers`: each named call raises, streams or returns."""

    def __init__(self, **outcomes: Any) -> None:
        self.outcomes = outcomes

    def __getattr__(self, name: str) -> Any:
        outcome = self.outcomes[name]

        def call(*_args: Any, **_kwargs: Any) -> Any:
            if isinstance(outcome, BaseException):
                raise outcome
            if callable(outcome):
                return outcome()
            return outcome

        return call


def over(**outcomes: Any) -> engine.Engine:
    client = type("Client", (), {"api": Calls(**outcomes), "containers": Calls(**outcomes)})()
    return engine.Engine(client)


def events_then(events: list[dict[str, Any]], exc: Exception | None = None) -> Any:
    def stream() -> Iterator[dict[str, Any]]:
        yield from events
        if exc is not None:
            raise exc

    return stream
