"""Memory tools broken on purpose, one defect each, over the reference store (TOOL).

Each class is the reference store with a tool front that gets one rule of the TOOL area wrong;
the store underneath is right, so a failure can only come from what the model sees. The zoo
(``tests/zoo.py``, area ``tool``) lists them with the example or check that catches each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memspec.reference_impl.store import Store
from memspec.spec.codec import usage
from memspec.spec.snapshot import usage_label
from memspec.spec.threats import find_threats
from memspec.spec.tool import (
    only_missing_old_text,
    parse_arguments,
    parse_call,
    watched_target,
)


class ToolFront(Store):
    """Not broken: the reference store; subclasses change its tool result by one defect."""

    def tool_call(self, arguments: str) -> str:
        before = tuple(self.entries(watched_target(arguments)))
        result = json.loads(super().tool_call(arguments))
        return json.dumps(self.broken(arguments, result, before), ensure_ascii=False)

    def broken(
        self, arguments: str, result: dict[str, Any], before: tuple[str, ...]
    ) -> dict[str, Any]:
        """The result the model reads, after the defect."""
        return result


class EchoesBlockedEntries(ToolFront):
    """Shows each blocked (injected) entry raw where the result has its placeholder, in
    ``current_entries``, ``matches`` and ``overwritten`` (TOOL-13; Hermes' ``current_entries``)."""

    def broken(
        self, arguments: str, result: dict[str, Any], before: tuple[str, ...]
    ) -> dict[str, Any]:
        target = watched_target(arguments)
        blocked = [e for e in (*before, *self.entries(target)) if find_threats(e)]
        for field in ("current_entries", "matches", "overwritten"):
            if isinstance(result.get(field), list):
                raw = iter(dict.fromkeys(blocked))
                result[field] = [
                    next(raw, item) if str(item).startswith("[BLOCKED:") else item
                    for item in result[field]
                ]
        return result


class StaleUsage(ToolFront):
    """Reports the usage and entry count from before the call (TOOL-7)."""

    def broken(
        self, arguments: str, result: dict[str, Any], before: tuple[str, ...]
    ) -> dict[str, Any]:
        if "usage" in result:
            limit = self.limits[watched_target(arguments)]
            result["usage"] = usage_label(usage(before), limit)
            result["entry_count"] = len(before)
        return result


class ReplaceSaysNothing(ToolFront):
    """A successful replace or patch does not say what it overwrote (TOOL-11)."""

    def broken(
        self, arguments: str, result: dict[str, Any], before: tuple[str, ...]
    ) -> dict[str, Any]:
        result.pop("overwritten", None)
        return result


class VagueMalformedError(ToolFront):
    """Answers every malformed call with "invalid arguments" (TOOL-6)."""

    def broken(
        self, arguments: str, result: dict[str, Any], before: tuple[str, ...]
    ) -> dict[str, Any]:
        if isinstance(parse_call(arguments, ("add", "replace", "remove", "patch"), True), list):
            return {**result, "error": "invalid arguments"}
        return result


class RaisesOnBadJson(ToolFront):
    """Parses the argument text without catching the error, so prose raises (TOOL-6)."""

    def tool_call(self, arguments: str) -> str:
        json.loads(arguments)
        return super().tool_call(arguments)


class MissingOldTextDeadEnd(ToolFront):
    """Answers a missing ``old_text`` with "old_text is required" and nothing to choose from
    (TOOL-10; hermes-agent #43412). The rest of the answer is right: the error names
    ``old_text`` and the action that needs it (TOOL-6), and the live ``usage`` and
    ``entry_count`` are there (TOOL-7), so the one defect is the missing listing."""

    def broken(
        self, arguments: str, result: dict[str, Any], before: tuple[str, ...]
    ) -> dict[str, Any]:
        problems = parse_call(arguments, ("add", "replace", "remove", "patch"), True)
        if isinstance(problems, list) and only_missing_old_text(problems):
            action = problems[0].expected[0]
            result.pop("current_entries", None)
            return {**result, "error": f"old_text is required for the action '{action}'"}
        return result


class FailedBatchEchoesStore(ToolFront):
    """A refused batch lists every entry, whatever refused it (TOOL-12; Hermes' batch errors)."""

    def broken(
        self, arguments: str, result: dict[str, Any], before: tuple[str, ...]
    ) -> dict[str, Any]:
        call = parse_arguments(arguments)
        if isinstance(call, dict) and "operations" in call and result["success"] is False:
            result["current_entries"] = self.entries(watched_target(arguments))
        return result


class AmbiguityWithoutMatches(ToolFront):
    """Says "several entries match" without listing them (TOOL-9)."""

    def broken(
        self, arguments: str, result: dict[str, Any], before: tuple[str, ...]
    ) -> dict[str, Any]:
        result.pop("matches", None)
        return result


class NullIsAValue(ToolFront):
    """Reads a member given as ``null`` as a value of the wrong type, not as absent (TOOL-4)."""

    def broken(
        self, arguments: str, result: dict[str, Any], before: tuple[str, ...]
    ) -> dict[str, Any]:
        call = parse_arguments(arguments)
        if isinstance(call, dict) and None in call.values():
            return {"success": False, "error": "old_text must be a string"}
        return result


class SchemaOffersRead(ToolFront):
    """Lists an action ``read`` in its schema that the tool does not execute (TOOL-2)."""

    def tool_schema(self) -> dict[str, Any]:
        schema = super().tool_schema()
        schema["parameters"]["properties"]["action"]["enum"].append("read")
        return schema


class NoBatchAdvice(ToolFront):
    """Its description never mentions ``operations`` though batch is claimed (TOOL-3)."""

    def tool_schema(self) -> dict[str, Any]:
        schema = super().tool_schema()
        schema["description"] = "Saves notes to memory (target memory) or the user profile (user)."
        return schema


class HidesReplace(ToolFront):
    """Its schema offers ``patch`` in place of core's ``replace``, and the tool refuses a replace
    call, as the 0.22 Hermes line's does (TOOL-2). An example whose call uses ``replace`` is then
    not verified, never failed on its own clause. The refusal is the answer its own schema owes
    a call of an action it does not offer: the error names ``action`` and every action the
    schema offers (TOOL-6), and it lists no entries (TOOL-12), so the one defect is the schema's.
    """

    ACTIONS = ("add", "remove", "patch")
    """The single-call actions its schema offers."""

    def tool_schema(self) -> dict[str, Any]:
        schema = super().tool_schema()
        action = schema["parameters"]["properties"]["action"]
        action["enum"] = [a for a in action["enum"] if a != "replace"]
        return schema

    def tool_call(self, arguments: str) -> str:
        call = parse_arguments(arguments)
        if isinstance(call, dict) and call.get("action") == "replace":
            target = watched_target(arguments)
            entries = self.entries(target)
            offered = ", ".join((*self.ACTIONS, "operations"))
            return json.dumps({
                "success": False,
                "error": f"'replace' is not available; action must be one of: {offered}",
                "usage": usage_label(usage(entries), self.limits[target]),
                "entry_count": len(entries),
            }, ensure_ascii=False)  # fmt: skip
        return super().tool_call(arguments)


def _factory(cls: type[Store]) -> Any:
    def open_store(
        root: Path, *, memory_char_limit: int = 2200, user_char_limit: int = 1375
    ) -> Store:
        return cls(Path(root).absolute(), memory_char_limit=memory_char_limit,
                   user_char_limit=user_char_limit)  # fmt: skip

    return open_store


echoes_blocked_entries = _factory(EchoesBlockedEntries)
stale_usage = _factory(StaleUsage)
replace_says_nothing = _factory(ReplaceSaysNothing)
vague_malformed_error = _factory(VagueMalformedError)
raises_on_bad_json = _factory(RaisesOnBadJson)
missing_old_text_dead_end = _factory(MissingOldTextDeadEnd)
failed_batch_echoes_store = _factory(FailedBatchEchoesStore)
ambiguity_without_matches = _factory(AmbiguityWithoutMatches)
null_is_a_value = _factory(NullIsAValue)
schema_offers_read = _factory(SchemaOffersRead)
no_batch_advice = _factory(NoBatchAdvice)
hides_replace = _factory(HidesReplace)
