"""The JSON the harness exchanges and keeps, by field: the protocol's requests and answers
(docs/backend-authors.md, the CONTRACT area) and the records of a history. Static types only: a
check may send a field of the wrong type on purpose (ENTRY-7, BATCH-5, CONTRACT-6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, Required, TypedDict, cast

RecallStep = TypedDict(
    "RecallStep", {"text": str, "raise": str, "hang": float, "value": object}, total=False
)
"""One step of a provider script: ``{"text"}``, ``{"raise"}``, ``{"hang", "text"?}`` or
``{"value"}`` (any JSON value but a string)."""


class Script(TypedDict, total=False):
    """A provider script of ``agent_start``: a name, its tools and recall, or unavailable."""

    name: Required[str]
    tools: list[str]
    recall: list[RecallStep]
    unavailable: bool


class BatchItem(TypedDict, total=False):
    """One item of a batch's ``operations``."""

    action: Required[str]
    content: str
    old_text: str


class Fields(TypedDict, total=False):
    """The fields of a request besides its op: those of ``open`` and of every op (OP_FIELDS)."""

    root: str
    memory_char_limit: int
    user_char_limit: int
    target: str
    content: str
    old_text: str
    new_content: str
    operations: list[BatchItem]
    raw: str
    base: str
    providers: list[Script]
    user: str
    reply: str
    point: str
    arguments: str
    hex: str | None
    """The bytes a worker's harness step ``put`` writes (``None`` deletes the file)."""


class Request(Fields, total=False):
    """A request: its ``op`` and fields, and the ``id`` the JSON Lines transport adds. In a
    history, a reader's sample is the request ``{"op": "read", "target": ...}``."""

    op: Required[str]
    id: int


def fields_of(request: Request) -> Fields:
    """Returns a request's fields: all but its ``op`` and ``id``."""
    return cast(Fields, {key: value for key, value in request.items() if key not in ("op", "id")})


class ProviderStatus(TypedDict):
    """What ``agent_start`` answers of each provider script."""

    name: str
    active: bool
    error: NotRequired[str]


class ApiMessage(TypedDict):
    """A message of the model's API as the agent ops carry it."""

    role: str
    content: str


class Answer(TypedDict, total=False):
    """An answer: ``ok`` and ``code``, the Outcome's optional fields, and what each op adds."""

    ok: Required[bool]
    code: Required[str]
    id: object
    """The request's ``id``, echoed as it was sent (the JSON Lines transport only)."""
    message: str
    matches: list[str]
    backup: str
    usage: str
    duplicate: bool
    item: int
    entries: list[str]
    snapshot: str | None
    block: str
    schema: Mapping[str, object]
    result: str
    features: list[str]
    backend: str
    version: str
    system: str | None
    providers: list[ProviderStatus]
    tools: list[str]
    messages: list[ApiMessage]
    history: list[ApiMessage]
    prefetches: int
    files: dict[str, str]
    """What a worker's harness step ``observe`` found: each file's bytes in hex, by name."""


class Sample(TypedDict, total=False):
    """The value of a reader's sample in a history: the file's entries, or unreadable (with
    ``error`` when the read failed)."""

    entries: list[str]
    unreadable: bool
    error: str


class Unanswered(TypedDict):
    """The value of an operation that got no answer (``info``): why."""

    message: str


EventType = Literal["invoke", "ok", "fail", "info"]


class HistoryRecord(TypedDict):
    """One line of a history file: an invoke or a completion of ``process``'s request."""

    type: EventType
    process: int
    op: Request
    time: float
    value: NotRequired[Answer | Sample | Unanswered]
