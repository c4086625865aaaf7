"""The executable examples of SPEC.md: extraction and the step grammar (see "How to read this").

An example is a fenced block whose info string is ``memspec id=<slug> clauses=<IDS>``, optionally
with ``limits=memory:40,user:30``; each line is one step, values are JSON literals.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from memspec.spec import codes
from memspec.spec.clauses import CLAUSE_ID
from memspec.spec.errors import SpecError
from memspec.spec.requests import OP_FIELDS
from memspec.spec.targets import TARGETS
from memspec.spec.threats import find_threats
from memspec.spec.versions import parse_version

FENCE_OPEN = re.compile(r"^```memspec(?P<info>(?:\s.*)?)$")
GIVEN = re.compile(r"^given\s+")
SESSION = re.compile(r"^@(?P<name>[a-z][a-z0-9_]*)\s+")
SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MUTATIONS = {"add": 1, "replace": 2, "remove": 1, "patch": 2, "batch": 1}
INDENT = "    "


class ExampleSyntaxError(SpecError):
    """An example in SPEC.md is malformed: a bug in the spec, not in a backend. Fix SPEC.md."""


@dataclass(frozen=True)
class Step:
    """One step of an example: a store call with its expectation, or an assertion. ``args`` are its
    JSON arguments (a target first; a ``tool`` step's is the argument text); ``expect`` is the
    expected code and outcome fields, a tool call's ``result`` fields, or the asserted value."""

    op: str
    args: tuple[Any, ...] = ()
    expect: dict[str, Any] = field(default_factory=dict)
    session: str = "a"
    line: int = 0
    given: bool = False
    """Whether the step only sets up what the example judges (``given add ...``): when the
    backend does not do what it says, the example's clauses cannot be judged past it."""

    def to_json(self) -> dict[str, Any]:
        """Returns the step as a JSON-ready record for ``memspec spec --dump-json``."""
        record: dict[str, Any] = {"session": self.session, "op": self.op, "line": self.line}
        if self.given:
            record["given"] = True
        if self.op == "tool":
            return record | {"arguments": self.args[0], "expect": _json_value(self.expect)}
        if self.op != "load":
            record["target"] = self.args[0]
        names = ("target", "data") if self.op == "put" else OP_FIELDS.get(self.op, ())
        record.update(zip(names[1:], (_json_value(a) for a in self.args[1:]), strict=True))
        if self.expect:
            record["expect"] = {key: _json_value(value) for key, value in self.expect.items()}
        return record


@dataclass(frozen=True)
class Example:
    """An Example is one executable block of SPEC.md, with the clause ids it pins."""

    id: str
    clauses: tuple[str, ...]
    steps: tuple[Step, ...]
    limits: dict[str, int]
    line: int

    @property
    def features(self) -> tuple[str, ...]:
        """The backend features the example needs (CONTRACT-20): ``batch``, ``patch`` (PATCH-1),
        ``threat-scan`` for ``E_THREAT`` or ``[BLOCKED:``, ``drift-guard`` for ``E_DRIFT``; ``core``
        always. A backups step needs nothing: every backend backs up what it rewrites (DRIFT-5)."""
        needed = ["core"]
        for step in self.steps:
            code = step.expect.get("code")
            value = step.expect.get("value")
            if step.op in ("batch", "patch"):
                needed.append(step.op)
            if step.op == "tool":
                needed += tool_step_features(step.args[0], step.expect.get("result", {}))
            if code == codes.E_THREAT or (isinstance(value, str) and "[BLOCKED:" in value):
                needed.append("threat-scan")
            if code == codes.E_DRIFT:
                needed.append("drift-guard")
        return tuple(dict.fromkeys(needed))

    def to_json(self) -> dict[str, Any]:
        """Returns the example as a JSON-ready record."""
        return {
            "id": self.id,
            "clauses": list(self.clauses),
            "features": list(self.features),
            "limits": dict(self.limits),
            "line": self.line,
            "steps": [step.to_json() for step in self.steps],
        }


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    return value


class _Reader:
    """Reads JSON literals and bare words from one step line, left to right."""

    def __init__(self, text: str, line: int) -> None:
        self.text, self.pos, self.line = text, 0, line
        self.decoder = json.JSONDecoder()

    def fail(self, message: str) -> ExampleSyntaxError:
        return ExampleSyntaxError(f"SPEC.md line {self.line}: {message}: {self.text!r}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def done(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def word(self) -> str:
        self.skip()
        match = re.compile(r"[^\s\"\[\{]+").match(self.text, self.pos)
        if not match:
            raise self.fail("expected a word")
        self.pos = match.end()
        return match.group()

    def peek_word(self) -> str | None:
        saved = self.pos
        try:
            return self.word()
        except ExampleSyntaxError:
            return None
        finally:
            self.pos = saved

    def value(self) -> Any:
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] in '"[{-0123456789tfn':
            try:
                value, self.pos = self.decoder.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as error:
                raise self.fail(f"bad JSON value ({error.msg})") from None
            return value
        raise self.fail("expected a JSON value")

    def target(self) -> Any:
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] == '"':
            return self.value()
        return self.word()

    def data(self) -> bytes | None:
        word = self.peek_word()
        if word == "absent":
            self.word()
            return None
        if word == "hex":
            self.word()
            raw = self.value()
            try:
                return bytes.fromhex(str(raw))
            except ValueError:
                raise self.fail(f"bad hex {raw!r}") from None
        text = self.value()
        if not isinstance(text, str):
            raise self.fail('file contents must be a string, hex ".." or absent')
        return text.encode("utf-8", "surrogatepass")


def _outcome(reader: _Reader) -> dict[str, Any]:
    if reader.word() != "->":
        raise reader.fail("expected '-> CODE'")
    code = reader.word()
    if code not in codes.OUTCOME_CODES:
        raise reader.fail(f"unknown code {code!r}")
    expect: dict[str, Any] = {"code": code}
    if not reader.done():
        extra = reader.value()
        if not isinstance(extra, dict):
            raise reader.fail("outcome fields must be a JSON object")
        expect.update(extra)
    return expect


def parse_step(text: str, line: int = 0) -> Step:
    """Returns the :class:`Step` a line of an example states (raises ExampleSyntaxError)."""
    given = GIVEN.match(text)
    if given:
        step = parse_step(text[given.end() :], line)
        if step.op not in (*MUTATIONS, "tool") or step.given:
            raise ExampleSyntaxError(
                f"SPEC.md line {line}: only a mutation or a tool call can be given: {text!r}"
            )
        return replace(step, given=True)
    session = "a"
    match = SESSION.match(text)
    if match:
        session, text = match.group("name"), text[match.end() :]
    reader = _Reader(text, line)
    op = reader.word()
    args: list[Any] = []
    expect: dict[str, Any] = {}
    if op == "load":
        pass
    elif op == "put":
        args = [reader.target(), reader.data()]
    elif op in MUTATIONS:
        args = [reader.target()] + [reader.value() for _ in range(MUTATIONS[op])]
        expect = _outcome(reader)
    elif op == "tool":
        value = reader.value()
        args = [value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)]
        if reader.word() != "->":
            raise reader.fail("expected 'tool ARGUMENTS -> {result fields}'")
        result = reader.value()
        if not isinstance(result, dict):
            raise reader.fail("the expected result fields are a JSON object")
        expect = {"result": result}
    elif op in ("entries", "snapshot"):
        args = [reader.target()]
        if reader.word() != "==":
            raise reader.fail(f"expected '{op} TARGET == VALUE'")
        expect = {"value": reader.value()}
    elif op == "disk":
        args = [reader.target()]
        if reader.word() != "==":
            raise reader.fail("expected 'disk TARGET == VALUE'")
        expect = {"value": reader.data()}
    elif op == "backups":
        args = [reader.target()]
        relation = reader.word()
        if relation not in ("==", "include"):
            raise reader.fail("expected 'backups TARGET == [...]' or 'include [...]'")
        contents = reader.value()
        if not isinstance(contents, list):
            raise reader.fail("backups are a JSON list")
        expect = {relation: [_backup_bytes(item, reader) for item in contents]}
    else:
        raise reader.fail(f"unknown step {op!r}")
    if not reader.done():
        raise reader.fail("unexpected text at the end of the step")
    return Step(op, tuple(args), expect, session, line)


def tool_step_features(arguments: str, result: dict[str, Any]) -> list[str]:
    """Returns the features a ``tool`` step needs (TOOL-1): ``tool``; ``batch`` for a call with
    ``operations``, ``patch`` for the action ``patch``; ``threat-scan`` when the arguments hold
    threat text or the expected result a ``[BLOCKED:`` placeholder."""
    needed = ["tool"]
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        if value.get("operations") is not None:
            needed.append("batch")
        if value.get("action") == "patch":
            needed.append("patch")
    if find_threats(arguments) or "[BLOCKED:" in json.dumps(result, ensure_ascii=False):
        needed.append("threat-scan")
    return needed


def _backup_bytes(item: Any, reader: _Reader) -> bytes:
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, dict) and isinstance(item.get("hex"), str):
        try:
            return bytes.fromhex(item["hex"])
        except ValueError:
            raise reader.fail(f"bad hex {item['hex']!r}") from None
    raise reader.fail('a backup is a string or {"hex": "..."}')


def _parse_info(info: str, line: int) -> tuple[str, tuple[str, ...], dict[str, int]]:
    fields = dict(part.split("=", 1) for part in info.split() if "=" in part)
    slug, ids = fields.get("id", ""), tuple(filter(None, fields.get("clauses", "").split(",")))
    where = f"SPEC.md line {line}"
    if not SLUG.match(slug):
        raise ExampleSyntaxError(f"{where}: example id must be a slug, got {slug!r}")
    if not ids or not all(CLAUSE_ID.fullmatch(cid) for cid in ids):
        raise ExampleSyntaxError(f"{where}: clauses must be AREA-N ids, got {ids!r}")
    limits: dict[str, int] = {}
    for part in filter(None, fields.get("limits", "").split(",")):
        name, _, number = part.partition(":")
        if name not in TARGETS or not number.isdigit() or int(number) < 1:
            raise ExampleSyntaxError(f"{where}: bad limits entry {part!r}")
        limits[name] = int(number)
    return slug, ids, limits


def parse_examples(text: str) -> list[Example]:
    """Returns every example of a SPEC.md text, in document order."""
    examples: list[Example] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        match = FENCE_OPEN.match(lines[index])
        index += 1
        if not match:
            continue
        start = index
        slug, ids, limits = _parse_info(match.group("info"), start)
        steps: list[Step] = []
        while index < len(lines) and lines[index] != "```":
            raw, number = lines[index], index + 1
            index += 1
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            block = re.fullmatch(r"(@[a-z][a-z0-9_]*\s+)?snapshot\s+(\S+):", raw)
            if block:
                body = []
                while index < len(lines) and lines[index].startswith(INDENT):
                    body.append(lines[index][len(INDENT) :])
                    index += 1
                session = (block.group(1) or "@a").strip()[1:]
                target = block.group(2)
                steps.append(
                    Step("snapshot", (target,), {"value": "\n".join(body)}, session, number)
                )
            else:
                steps.append(parse_step(raw, number))
        if index >= len(lines):
            raise ExampleSyntaxError(f"SPEC.md line {start}: example {slug!r} is never closed")
        index += 1
        examples.append(Example(slug, ids, tuple(steps), limits, start))
    seen: set[str] = set()
    for example in examples:
        if example.id in seen:
            raise ExampleSyntaxError(f"SPEC.md line {example.line}: duplicate id {example.id!r}")
        seen.add(example.id)
    return examples


def examples_json(text: str) -> list[dict[str, Any]]:
    """Returns the examples of a SPEC.md text as ``memspec spec --dump-json`` prints them: a list
    of :meth:`Example.to_json` records, each with the ``spec_version`` the text states, so that
    a runner in another language can tell which version its copy holds (raises
    VersionSyntaxError when the text states no version)."""
    version = parse_version(text).number
    return [{**example.to_json(), "spec_version": version} for example in parse_examples(text)]
