"""The sweep of real Hermes memory providers: each certified with ``memspec provider`` as a user
installs it, and each clause it fails argued from its own code.

:data:`SUBJECTS` are the providers that run on one machine without an account: packages from the
package index (installed with ``--package`` beside hermes-agent 0.19.0, in an environment of
their own) and the provider hermes-agent 0.19.0 bundles that needs nothing (``holographic``).
:data:`NOTES` say, for each clause a subject fails, where in the provider's code the behaviour
is (file and line of the version named) and why it is the code's own; :data:`ELSEWHERE` lists
the other memory providers on the index, each with why it is not certified here. Run from the
project root::

    python -m tests.providers_sweep                        # every subject, profile ci
    python -m tests.providers_sweep -k mnemosyne           # subjects whose key holds a word
    python -m tests.providers_sweep --page docs/results/providers.md
    python -m tests.providers_sweep --out DIR              # keep the reports and the run
    python -m tests.providers_sweep --from DIR --page FILE # render a kept run again
    python -m tests.providers_sweep --json docs/results/providers.json  # the run as JSON too

Every certification runs in a process of its own with the network refused (memspec's driver),
its reports under ``--out`` (a temporary directory by default); a package's installer, where the
package's documentation says to run one, runs with a scratch ``HOME`` and Hermes home. Exit
status: 0 when every failing clause of every subject has its note and every note its failure, 1
when not (a verdict not argued yet, or a note gone stale: either is for a person to settle by
reading the code again), 2 for a usage error.

``--json FILE`` (with a run or with ``--from``) writes the run as the JSON ``memspec site``
renders (:func:`run_json`)::

    {"sweep": "providers", "hermes": "0.19.0", "profile": "ci",
     "clauses": [{"clause": "PLUGIN-1", "level": "MUST"}, ...],     # the provider's clauses
     "subjects": [{
        "key": "holographic", "title": ..., "how": ..., "package": "NAME==VERSION" or null,
        "bundled": "FOLDER" or null, "environment": {...},
        "status": 1 or null (timed out, not prepared), "wall": 46.0 (seconds),
        "level": "safe" or null (no report), "blocked_by": [...],
        "counts": {"passed": 15, "failed": 3, "skipped": 1, ...} or null, "not_judged": 1,
        "verdicts": [{"clause": "PLUGIN-11", "status": "fail", "why": "..."}, ...],
        "failing": [{"clause": "PLUGIN-11", "failure": "...", "note": "..." or null}],
        "unjudged": [{"clause": "PLUGIN-12", "why": "unchecked: not judged"}],
        "figures": {"initialize_s": 0.18, "prefetch_max_s": ..., "sync_turn_max_s": ...},
        "output": "the last lines memspec printed, when it left no report" or null}],
     "elsewhere": [{"package": ..., "why": ...}], "not_yet": [{"package": ..., "why": ...}],
     "unsettled": ["what a person must settle", ...]}

``verdicts`` are the clause rows of the subject's ``report.json`` (``pass``, ``fail``, ``expected
fail``, ``skip``, ``n/a``, ``unchecked``), ``note`` the subject's :data:`NOTES` entry (``null``:
not argued yet).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memspec.conformance.core.locations import cache_dir
from memspec.conformance.core.results_page import PageRun, writable_page
from memspec.conformance.hermes.providers import DEFAULT_HERMES
from memspec.conformance.hermes.releases import Release, ensure_venv
from memspec.spec.document import installed_spec
from memspec.spec.errors import UsageError

PROJECT = Path(__file__).resolve().parent.parent
PROG = "python -m tests.providers_sweep"
CERTIFY_TIMEOUT = 3600.0
"""Seconds one subject's certification may take before it is reported as timed out."""
HERMES = Release("hermes-agent", DEFAULT_HERMES)


@dataclass(frozen=True)
class Subject:
    """A Subject is one provider as a user installs it: ``package`` (``NAME==VERSION``) from
    the package index, or ``bundled``, the folder of a provider hermes-agent ships under
    ``plugins/memory``. ``installer`` is the package's own command that writes its plugin folder
    into a Hermes home (``{home}`` stands for it), ``plugin`` that folder below the home;
    ``home_setup`` is the package's own command that prepares each Hermes home the provider is
    given (``memspec provider --home-setup``: ``{home}`` stands for the home, ``{python}`` for
    the environment's interpreter, and its first word is a script of that environment);
    ``environment`` holds the variables the user sets; ``python`` is the interpreter its
    environment is built with (``memspec provider --python``) where the one running the sweep
    lacks what the provider needs; ``how`` says how it is installed."""

    key: str
    title: str
    how: str
    package: str | None = None
    bundled: str | None = None
    installer: tuple[str, ...] = ()
    plugin: str = ""
    environment: Mapping[str, str] = field(default_factory=dict)
    python: str | None = None
    home_setup: tuple[str, ...] = ()


SUBJECTS: tuple[Subject, ...] = (
    Subject(
        "holographic",
        "holographic (bundled with hermes-agent 0.19.0)",
        "bundled: `plugins/memory/holographic`, loaded as `plugins.memory.holographic`",
        bundled="holographic",
    ),
    Subject(
        "yantrikdb",
        "yantrikdb-hermes-plugin 0.27.1",
        "`--package`: its top-level package is the plugin folder (`register(ctx)`), as "
        "`yantrikdb-hermes install` copies it into `$HERMES_HOME/plugins/yantrikdb`",
        package="yantrikdb-hermes-plugin==0.27.1",
    ),
    Subject(
        "mnemosyne",
        "mnemosyne-hermes 0.7.6",
        "`--package`: the package its `hermes_agent.memory_providers` entry point names, as "
        "`mnemosyne-hermes install` links it into `$HERMES_HOME/plugins/mnemosyne`",
        package="mnemosyne-hermes==0.7.6",
    ),
    Subject(
        "mnemosyne-no-embeddings",
        "mnemosyne-hermes 0.7.6, `MNEMOSYNE_NO_EMBEDDINGS=1`",
        "as above, with the embedder turned off as its documentation offers for offline use",
        package="mnemosyne-hermes==0.7.6",
        environment={"MNEMOSYNE_NO_EMBEDDINGS": "1"},
    ),
    Subject(
        "local-memory",
        "hermes-local-memory 0.3.1",
        "`--package` with the folder its own installer writes "
        "(`hermes-local-memory install-shim --hermes-home HOME`, the documented step): "
        "`plugins/local_memory`, whose `register(ctx)` registers `LocalMemoryProvider()`",
        package="hermes-local-memory==0.3.1",
        installer=("hermes-local-memory", "install-shim", "--hermes-home", "{home}"),
        plugin="plugins/local_memory",
    ),
    Subject(
        "llmwiki",
        "hermes-llmwiki 0.1.1",
        "`--package`: its top-level package `hermes_llmwiki`, whose `register(ctx)` registers "
        "`LlmwikiMemoryProvider()` (its README: `pip install hermes-llmwiki`)",
        package="hermes-llmwiki==0.1.1",
    ),
    Subject(
        "okf",
        "hermes-okf 0.5.9",
        "`--package` with the folder its own installer writes (`hermes-okf install-plugin`, "
        "the documented step, into `~/.hermes/plugins/hermes-okf`), whose `__init__.py` imports "
        "its `HermesOKFMemoryProvider`",
        package="hermes-okf==0.5.9",
        installer=("hermes-okf", "install-plugin"),
        plugin=".hermes/plugins/hermes-okf",
    ),
    Subject(
        "verbatim",
        "verbatim-memory 1.0.0",
        "`--package`: the package its `hermes_agent.memory_providers` entry point names "
        "(`verbatim`), whose `register(ctx)` registers `VerbatimMemoryProvider()` (its README: "
        "`pip install verbatim-memory`)",
        package="verbatim-memory==1.0.0",
    ),
    Subject(
        "nyx",
        "nyx-memory 7.16.0",
        "`--package`: the package its `hermes_agent.memory_providers` entry point names "
        "(`nexsandglass_hermes`), whose `register(ctx)` registers `NexSandglassProvider()`; "
        "for hermes-agent 0.19.x its README has `pip install nyx-memory` and `python3 -m "
        "nexsandglass_hermes install` write an entry file into `$HERMES_HOME/plugins/nyx` "
        "whose `register` does the same",
        package="nyx-memory==7.16.0",
    ),
    Subject(
        "recall",
        "recall-memory-hermes 0.3.0",
        "`--package`: its top-level package `recall_memory_hermes`, the same `__init__.py` and "
        "`memory_policy.py` as the root of its Git repository, which its README's `hermes "
        "plugins install Jnocode/recall-memory-hermes` puts into "
        "`$HERMES_HOME/plugins/recall-memory-hermes`; built with `--python /usr/bin/python3`, "
        "whose SQLite loads extensions (recall-sqlite 0.2.0 calls `enable_load_extension` for "
        "sqlite-vec, `recall/store.py`:80; the sweep's default interpreter lacks it)",
        package="recall-memory-hermes==0.3.0",
        python="/usr/bin/python3",
    ),
    Subject(
        "scope-recall",
        "hermes-scope-recall 3.15.1",
        "`--package`: the package its `hermes_agent.memory_providers` entry point names "
        "(`scope_recall.distribution.hermes`), with `--home-setup` running its README's "
        "installer in each Hermes home memspec gives it: `scope-recall apply-install --host "
        "hermes --target-plugin-dir HOME/plugins/scope-recall --instance-root HOME --agent-id "
        "default --python PYTHON` (the profile `default`, as on an isolated home), which writes "
        "the installation manifest and `memory.sqlite3` its `initialize` binds to",
        package="hermes-scope-recall==3.15.1",
        home_setup=(
            "scope-recall",
            "apply-install",
            "--host",
            "hermes",
            "--target-plugin-dir",
            "{home}/plugins/scope-recall",
            "--instance-root",
            "{home}",
            "--agent-id",
            "default",
            "--python",
            "{python}",
        ),
    ),
)
"""The providers certified, in the order of the page."""

_ABC = "hermes-agent 0.19.0 `agent/memory_provider.py`"
_HOLO = "`plugins/memory/holographic/__init__.py`"
_LOCAL = "hermes-local-memory 0.3.1 `hermes_local_memory/provider.py`"
_YANTRIK = "yantrikdb-hermes-plugin 0.27.1 `yantrikdb_hermes_plugin/__init__.py`"
_MNEMO = "mnemosyne-hermes 0.7.6 `mnemosyne_hermes/__init__.py`"
_WIKI = "hermes-llmwiki 0.1.1 `hermes_llmwiki/__init__.py`"
_OKF = "hermes-okf 0.5.9 `hermes_okf/memory_plugin.py`"
_OKF_WRITE = "`hermes_okf/hermes_integration.py`:291-312"
_VERBATIM = "verbatim-memory 1.0.0 `verbatim/provider.py`"
_RECALL = "recall-memory-hermes 0.3.0 `recall_memory_hermes/__init__.py`"
_NYX = "nyx-memory 7.16.0 `nexsandglass/core/memory_provider.py`"
_NYX_HERMES = "`nexsandglass_hermes/__init__.py`"
_POLICY = "`recall_memory_hermes/memory_policy.py`"
_SCOPE = "hermes-scope-recall 3.15.1 `scope_recall"
_EMBED = (
    "mnemosyne-memory 4.0.0b6 (its dependency) `mnemosyne/core/embeddings.py`:347-385, `_get_model`"
)
_SHARED = (
    f"{_MNEMO}:3859 puts the shared surface database (its `mnemosyne_shared_*` tools) at "
    '`Path.home() / ".mnemosyne" / "data" / "shared" / "mnemosyne.db"` unless '
    "configured, outside `hermes_home` (its own setting's description, :2130, says "
    "`<mnemosyne>/data/shared`), and it names no `backup_paths()` (it keeps the interface's "
    "`[]`): `hermes backup` misses it. Declaring the path in `backup_paths()` passes."
)
_PRE_COMPRESS = (
    f"{_MNEMO}:5223-5233, `on_pre_compress` returns `None`; the interface declares `-> str`, "
    f'"Return empty string for no contribution" ({_ABC}:220-230). Hermes 0.19.0\'s manager '
    "skips a falsy result (Deviations, PLUGIN-16)."
)
NOTES: dict[tuple[str, str], str] = {
    ("holographic", "PLUGIN-11"): (
        f"{_HOLO}:222 defines `sync_turn(self, user_content, assistant_content, *, "
        'session_id="")`, without the `messages` keyword the interface declares '
        f"({_ABC}:116-123). Hermes 0.19.0's manager reads the signature and leaves `messages` "
        "out, so Hermes never calls it so (Deviations, PLUGIN-11); another host calling the "
        "interface as declared gets `TypeError`."
    ),
    ("holographic", "PLUGIN-13"): (
        f'By design: {_HOLO}:222-225, `sync_turn` does nothing ("Holographic memory stores '
        'explicit facts via tools, not auto-sync"), and `on_session_end` (:237-242) extracts '
        "facts only when `auto_extract` is set, `false` by default (:12, :153). It recalls "
        "what its tools and the built-in tool's writes stored, never a turn: the SHOULD's "
        "stated deviation, no level held back."
    ),
    ("holographic", "PLUGIN-14"): (
        f"{_HOLO}:244 defines `on_memory_write(self, action, target, content)`, without the "
        f"`metadata` the interface declares ({_ABC}:280-286); Hermes 0.19.0's manager reads "
        "the signature and calls it with three arguments (Deviations, PLUGIN-14), another "
        "host gets `TypeError` on every mirrored write."
    ),
    ("yantrikdb", "PLUGIN-5"): (
        f'{_YANTRIK}:2556, `_do_remember` calls `(args.get("text") or "").strip()` on '
        "whatever `text` is, and `handle_tool_call` (:2478-2551) catches only its own "
        "`YantrikDBError` kinds: a `text` that is a number raises `AttributeError` out of the "
        "tool. Hermes 0.19.0 turns the raise into an error result of its own (Deviations, "
        "PLUGIN-5)."
    ),
    ("yantrikdb", "PLUGIN-6"): (
        f"{_YANTRIK}:1788, `initialize` builds its engine synchronously "
        "(`make_backend` → `EmbeddedYantrikDBClient`, `yantrikdb_hermes_plugin/embedded.py`:"
        "392-445, the embedded engine and its embedder): 7.2 s measured alone, no network "
        "attempt made. Hermes 0.19.0 calls `initialize_all` on the agent's start-up path "
        "(`agent/agent_init.py`:1507): the agent waits that long before its first turn "
        "(#51492). The 5-second budget is memspec's (PLUGIN-6)."
    ),
    ("yantrikdb", "PLUGIN-8"): (
        f"{_YANTRIK}:1725 skips a session only for `cron` and `flush`; with `agent_context` "
        "`subagent` it starts its engine, and `sync_turn` (:2249) and the other writers test "
        "only that flag, so a subagent's turns land in the user's database (the engine writes "
        "through its own code, seen on disk: the database holds more after than before). The "
        f'interface ({_ABC}:74-76): "Providers should skip writes for non-primary '
        "contexts\". Hermes 0.19.0's own agent starts providers as `primary` only "
        "(`agent/agent_init.py`:1467), so it bites another host or a later release."
    ),
    ("yantrikdb", "PLUGIN-11"): (
        f"{_YANTRIK}:2227-2233, `sync_turn` takes no `messages` (interface: {_ABC}:116-123); "
        "Hermes 0.19.0's manager leaves it out for it (Deviations, PLUGIN-11)."
    ),
    ("yantrikdb", "PLUGIN-14"): (
        f"{_YANTRIK}:4576, `on_memory_write(self, action, target, content)` takes no "
        f"`metadata` (interface: {_ABC}:280-286); Hermes 0.19.0's manager calls it with three "
        "arguments (Deviations, PLUGIN-14)."
    ),
    ("mnemosyne", "PLUGIN-5"): (
        f"{_EMBED}: with the network unreachable, every call that embeds (here "
        "`mnemosyne_remember`) tries to load the embedding model again — `_get_model` keeps no "
        "failure, only a model, and fastembed's download retries take about 39 s — so the tool "
        "had not returned at 20 s. The sweep stops at the first tool call that hangs."
    ),
    ("mnemosyne", "PLUGIN-7"): _SHARED,
    ("mnemosyne", "PLUGIN-9"): (
        f"{_EMBED}, reached from `prefetch` ({_MNEMO}:2812-2931, under the lock of "
        "`_beam_session_scope`, :3062-3066): each prefetch tries the download again, about "
        "39 s, so no prefetch returns within 2 s — nor within Hermes' own 8 s (the issue's "
        "observation: Hermes drops its recall every turn)."
    ),
    ("mnemosyne", "PLUGIN-11"): (
        f"{_EMBED}, reached from `sync_turn` ({_MNEMO}:3107, `beam.remember` with "
        "`extract_entities=True`, :3156-3180) on the caller's thread: about 39 s a turn, "
        'where the interface asks for a queue ("Should be non-blocking").'
    ),
    ("mnemosyne", "PLUGIN-14"): (
        f"{_MNEMO}:5352, `on_memory_write(self, action, target, content)` takes no `metadata` "
        f"(interface: {_ABC}:280-286); Hermes 0.19.0's manager calls it with three arguments "
        "(Deviations, PLUGIN-14)."
    ),
    ("mnemosyne", "PLUGIN-15"): (
        f"{_MNEMO}:5265, `on_session_switch` takes the lock that `_beam_session_scope` "
        "(:3062-3066) holds across a whole recall or write, embedder included: behind a "
        "`sync_turn` still retrying the model download it waits with it. In Hermes the same "
        "happens behind a prefetch abandoned at 8 s."
    ),
    ("mnemosyne", "PLUGIN-16"): _PRE_COMPRESS,
    ("mnemosyne", "PLUGIN-17"): (
        f"{_MNEMO}:5384-5412, `shutdown` takes the same lock (:5409) unless a consolidation "
        "overran, so it waits for the call still retrying the model download (about 39 s) "
        "past its 5-second budget."
    ),
    ("mnemosyne-no-embeddings", "PLUGIN-7"): _SHARED,
    ("mnemosyne-no-embeddings", "PLUGIN-10"): (
        f"{_MNEMO}:2909-2931 formats each recalled memory with `_format_prefetch_content` "
        "(:327-341), which only shortens it: a turn that held `</memory-context>` comes back "
        "with the tag, and the host's fence (FENCE-1) is closed early by recalled text "
        "(#33248). The filter at :1277 looks for `[System note:` only."
    ),
    ("mnemosyne-no-embeddings", "PLUGIN-13"): (
        f'By design: {_MNEMO}:2812-2817, `prefetch` is "strictly session-scoped" (the '
        "comment at :2836-2843: recall keeps session scoping), and `sync_turn` stores each "
        "turn with the default scope `session` (:1571, :3156-3162): a turn is recalled in "
        "the session it was synced in, not in the next one. The SHOULD's stated deviation."
    ),
    ("mnemosyne-no-embeddings", "PLUGIN-14"): (
        f"{_MNEMO}:5352, `on_memory_write` takes no `metadata`, as above."
    ),
    ("mnemosyne-no-embeddings", "PLUGIN-16"): _PRE_COMPRESS,
    ("local-memory", "PLUGIN-1"): (
        f"{_LOCAL}:320, `class LocalMemoryProvider:` subclasses nothing (its docstring: it "
        '"intentionally mirrors the subset of Hermes\' MemoryProvider lifecycle"), and the '
        "shim its installer writes (`hermes_local_memory/hermes_plugin.py`:39-40, "
        "`ctx.register_memory_provider(LocalMemoryProvider())`) registers it. It lacks eight "
        "hooks of the interface; Hermes 0.19.0 takes it and its manager catches each call of "
        "one it lacks."
    ),
    ("local-memory", "PLUGIN-11"): (
        f'{_LOCAL}:716, `sync_turn(self, user_content, assistant_content, *, session_id="")` '
        f"takes no `messages` (interface: {_ABC}:116-123); the issue's `TypeError`. Hermes "
        "0.19.0's manager leaves `messages` out for it (Deviations, PLUGIN-11)."
    ),
    ("local-memory", "PLUGIN-13"): (
        f"{_LOCAL}:716-731 stores each turn as two messages; `prefetch` (:733-740) builds its "
        "context from `LocalMemoryStore.build_context` "
        "(`hermes_local_memory/store.py`:706-725), which reads the peer card, the durable "
        "facts and a search of facts, never the messages: a turn is recalled only once a "
        "fact is drawn from it (its tools, its maintenance review). The SHOULD's stated "
        "deviation."
    ),
    ("llmwiki", "PLUGIN-13"): (
        f"By design: {_WIKI}:185-225, `sync_turn` appends each turn to the day's chronicle "
        "note (`chronicle/daily/`), and `prefetch` (:239-252) searches only the compiled layer "
        "(`entities`, `concepts`, `comparisons`, `projects`, `queries`: "
        "`hermes_llmwiki/search.py`:30); a turn reaches it once `hermes llmwiki curate` "
        "(`hermes_llmwiki/cli.py`:111) or the model's `create_entity` writes it there. The "
        "SHOULD's stated deviation."
    ),
    ("okf", "PLUGIN-8"): (
        f"{_OKF}:79-130, `initialize` never reads `agent_context`, and `sync_turn` (:238-256) "
        "and `on_memory_write` (:338-349) write to the bundle whatever it was "
        f"({_OKF_WRITE}, `write_concept` under `okf_memory/hermes/observations`): a "
        f"subagent's turns land in the user's memory. The interface ({_ABC}:74-76): \"Providers "
        'should skip writes for non-primary contexts".'
    ),
    ("okf", "PLUGIN-13"): (
        f'{_OKF}:250-256, `sync_turn` passes the user\'s words to `on_memory_write("user", '
        f"...)`, which writes them as the day's one concept `user_profile_<date>` ({_OKF_WRITE}: "
        "`write_concept` overwrites the file, `hermes_okf/bundle.py`:105-130), and the "
        'assistant\'s to `on_memory_write("assistant", ...)`, which stores nothing: of the '
        "turns of a day only the last is kept to be recalled."
    ),
    ("verbatim", "PLUGIN-13"): (
        f"By design: {_VERBATIM}:93-99, the host's default scope is `conversation_scope` "
        '(`verbatim/core/identity.py`:95-107: "missing identity stays conversation-private", '
        "visibility `CONVERSATION`); `sync_turn` captures each turn in the session's partition "
        "(`verbatim/adapters/hermes_v3.py`:373-400, `_scope` :753-763), and `prefetch` "
        "(:357-376) recalls in the scope of the session asking (`_session_scope`, :758-767), "
        "which `can_read` (`verbatim/core/identity.py`:44-60) lets read a conversation's "
        "evidence only in that conversation: a turn is recalled in the session it was synced "
        "in, not in the next one. The SHOULD's stated deviation."
    ),
    ("recall", "PLUGIN-5"): (
        f'{_RECALL}:546-572, `handle_tool_call` answers prose in every case: "No relevant '
        'memories found." (:564), "Found N relevant memories:" and a numbered list (:566-569), '
        '"Unknown memory tool: ..." (:554), "Query must not be empty." (:560), "Recall search '
        'failed: ..." (:572); none is JSON. Hermes 0.19.0 passes any text to the model '
        "(Deviations, PLUGIN-5)."
    ),
    ("recall", "PLUGIN-10"): (
        f"{_RECALL}:449-466, `sync_turn` stores a turn whose user text asks to be remembered "
        f'("remember this", {_POLICY}:48, admitted by `should_store_turn`, :112-119) as a card '
        "holding the user's words as they are (`build_semantic_content`, :153-159; `_bounded`, "
        ":98-102, only drops NUL and shortens), as `on_memory_write` (`__init__.py`:468-523) "
        "keeps the built-in tool's write (`build_builtin_content`, :162-168); `prefetch` "
        "(`__init__.py`:371-398) puts each recalled card, up to 800 characters, into its text "
        "unchanged (`__init__.py`:392-394): a turn that held `</memory-context>` comes back with "
        "the tag, and closes the host's fence (FENCE-1) early (#33248)."
    ),
    ("recall", "PLUGIN-13"): (
        f"By design: {_RECALL}:449-466, `sync_turn` stores a turn only when "
        f"`should_store_turn` ({_POLICY}:112-119) finds in the user's words one of its markers "
        'of explicit, durable intent (:27-56: "remember this", "my preference", "from now '
        'on", "decision:", ...); its system prompt says so ("Ordinary chat is not persisted", '
        "`__init__.py`:578). The plain statements the clause syncs hold none, so none is stored. "
        "The SHOULD's stated deviation."
    ),
    ("nyx", "PLUGIN-10"): (
        f"{_NYX}:699-752, `sync_turn` logs each side of a turn as it is (its secrets masked, "
        "`_scrub_turn` :755-765, nothing else), as `on_memory_write` (:1141-1150) logs the "
        "built-in tool's write, and `prefetch` (:622-660) puts each recalled memory, up to 300 "
        "characters, into its text unchanged (:646-649): a turn that held `</memory-context>` "
        "comes back with the tag, and closes the host's fence (FENCE-1) early (#33248)."
    ),
    ("nyx", "PLUGIN-14"): (
        f"{_NYX}:1141-1150, `on_memory_write` logs every write it is given "
        '(`log_message(f"[{action}] {target}: ..."`, `nexsandglass/core/sandglass_log.py`:52) '
        "without looking whether the same entry is already there: the built-in tool's add given "
        "twice is stored, and recalled, twice (#110682)."
    ),
    ("nyx", "PLUGIN-19"): (
        f"By design: nyx-memory 7.16.0 {_NYX_HERMES}:71-82, the data directory is "
        "`NEXSANDBASE_HOME`, else `data_dir` of the profile's `nyx.json`, else `~/.neurobase` "
        '(:24), "one memory per person, not split per agent" (its comment, :74); and it is '
        "fixed for the process when nexsandglass is first imported "
        "(`nexsandglass/core/sandglass_paths.py`:10, `_NB`): a second profile's own `data_dir` "
        'only logs "takes effect after a restart" (`apply_data_dir`, :85-94). Two profiles one '
        "gateway serves share one memory, each recalling what the other was told."
    ),
    ("scope-recall", "PLUGIN-9"): (
        f"{_SCOPE}/adapters/hermes/prefetch.py`:30-75, `prefetch` (`Prefetch.recall`) hands the "
        "query to `core.recall_packet` as it came and catches nothing; "
        "`scope_recall/core/composition.py`:439 validates it against "
        "`contracts/recall_request.schema.json`, whose `query` has `maxLength` 8192 (:17-21), "
        "and a longer one raises `ContractError` (`INPUT_INVALID: invalid query`; "
        "`core/retrieval.py`:132-134 refuses it again). A turn of 20,000 characters (a pasted "
        'log) makes `prefetch` raise instead of returning `""`; Hermes 0.19.0\'s manager logs '
        "it at debug level (`agent/memory_manager.py`:530-531) and the turn goes without recall."
    ),
}
"""For each (subject key, clause) the sweep finds failing: where the provider's code does it
(file and line in the version certified) and why the verdict is the code's own."""

ELSEWHERE: tuple[tuple[str, str], ...] = (
    (
        "byterover (bundled)",
        'the `brv` command of ByteRover (`is_available`, "\n        '
        '"`plugins/memory/byterover/__init__.py`:235-237) and its account',
    ),
    (
        "hindsight (bundled)",
        'a Hindsight server or its cloud (`mode`, default `cloud`, "\n        '
        '"`plugins/memory/hindsight/__init__.py`:720-730)',
    ),
    (
        "honcho (bundled)",
        "Honcho's API: an API key or a server URL (`plugins/memory/honcho/__init__.py`:302-307)",
    ),
    (
        "mem0 (bundled)",
        "Mem0's platform (an API key), a Mem0 host, or a vector store server \"\n        "
        '"(`plugins/memory/mem0/__init__.py`:226-233)',
    ),
    (
        "openviking (bundled)",
        'an OpenViking server (`OPENVIKING_ENDPOINT`, "\n        '
        '"`plugins/memory/openviking/__init__.py`:1832-1841)',
    ),
    ("retaindb (bundled)", "RetainDB's API key (`plugins/memory/retaindb/__init__.py`:478-479)"),
    (
        "supermemory (bundled)",
        "Supermemory's API key (`plugins/memory/supermemory/__init__.py`:567-575)",
    ),
    ("aidumem 17.0.2", "its description: self-hosted, with Qdrant recall (a Qdrant server)"),
    (
        "atomicmemory-hermes 0.2.3",
        "AtomicMemory's Cloud (an API key) or its Core server: `_runtime_sdk_config` "
        "(`atomicmemory_hermes/__init__.py`:325-338) takes `ATOMICMEMORY_API_URL`, else the Cloud "
        "when a key is set, else Core at `http://127.0.0.1:17350` (`python_sdk.py`:33-34); "
        "`initialize` (:114-130) opens the SDK's client to it",
    ),
    (
        "augmem-hermes 0.1.0",
        "an embedding model from Hugging Face: `initialize` (`augmem/hermes/provider.py`:357-387) "
        "builds `cortext.Cortext`, whose constructor (augmem.cortext 2.0.0 "
        "`cortext/__init__.py`:1136-1142, `cortext/model.py`:170-184, :355-364) downloads the "
        "AIST-87M model (141 MB) on first use; the wheel ships none",
    ),
    ("betterdb-hermes-memory 0.1.0", "its description: Valkey with valkey-search (a server)"),
    ("chronalyn 1.1.0", "its description: orchestrates Hindsight (a server) with Mnemosyne"),
    (
        "cognee-integration-hermes-agent 1.3.2",
        "its description: Cognee Cloud, or cognee run locally (with a language model)",
    ),
    ("colony-hermes 1.2.1", "its description: a Colony sidecar (a server process)"),
    ("colony-memory-hermes 0.2.0", "its description: The Colony's vault (a service)"),
    (
        "forge-hermes-plugin 0.3.81",
        "not a memory provider: `register(ctx)` (`forge_hermes/__init__.py`:88-106) registers "
        "tools, hooks and skills, no `MemoryProvider`; its tools call the Forge runtime over HTTP "
        "(`forge_hermes/tools.py`:709-750, a local server)",
    ),
    (
        "fragmented-memory 2.1.0",
        "a Redis server with RediSearch: `initialize` (`fragmented_memory/__init__.py`:307-341) "
        "opens `RedisStorage` at `127.0.0.1:6379`, a Redis client "
        "(`fragmented_memory/storage.py`:197-221)",
    ),
    (
        "hermes-brain-memory 0.1.0",
        "the `brain` command of the npm package brain-memory, run as a process for every hook: "
        "`is_available` looks it up on `PATH` "
        "(`hermes_brain_memory/_vendor/brain/provider.py`:522-527), `_run_brain` (:552-588) runs "
        "it with `subprocess.run`; memspec's driver starts no process of a provider's",
    ),
    (
        "hermes-cashew 0.10.2",
        "an embedding model from Hugging Face: recall and each turn's graph embed with "
        "`thenlper/gte-large` (`plugins/memory/cashew/config.py`:29, set in `initialize`, "
        "`plugins/memory/cashew/__init__.py`:441-466), loaded by cashew-brain 1.2.1 as "
        "`SentenceTransformer(model)` (`core/embedding_service.py`:123-126)",
    ),
    (
        "hermes-hy-memory 0.2.8, hyatlas-memory 1.4.2",
        "their descriptions: Tencent Hunyuan's HY Memory framework (a service)",
    ),
    (
        "hermes-itsuki 0.1.0",
        "Itsuki's service: `is_available` needs `ITSUKI_API_KEY` "
        "(`hermes_itsuki/provider.py`:118-121), `initialize` (:144-193) builds its `MemoryClient` "
        "on `https://itsuki.app` (`hermes_itsuki/config.py`:19)",
    ),
    (
        "hermes-kiokuko 0.1.25",
        "a later Hermes: its host check (`_memory_sync_probe`, "
        "`hermes_kiokuko/compatibility.py`:105-147) wants `MemoryManager.sync_all` to run "
        "`sync_turn` in the caller's context, which Hermes 0.19.0's worker does not carry "
        "(`agent/memory_manager.py`:628-684, `executor.submit(fn)` at :710), so `initialize` "
        "(`hermes_kiokuko/provider.py`:24-26, `hermes_kiokuko/runtime.py`:18-20, "
        "`compatibility.py`:251-254) raises `HOST_CONTRACT_MISMATCH` (memspec's run); it is "
        "installed with `hermes plugins install` (its pip package's "
        "`hermes_kiokuko/memory_plugin/__init__.py` names neither mark Hermes 0.19.0 looks for), "
        "and runs only in a home `setup` configured (`hermes_kiokuko/config.py`:53-63, :114-150)",
    ),
    (
        "hermes-local-rag 1.6.0",
        "the EmbeddingGemma 300M model from Hugging Face (gated: a token and Gemma's terms, "
        "`local_rag/dashboard/plugin_api.py`:43-44): `is_available` needs the model file "
        "(`local_rag/provider.py`:59-66, `local_rag/embedder.py`:16-21), and `initialize` "
        "(:106-124) talks to its inference daemon over a socket (`local_rag/inference.py`:258-285)",
    ),
    ("hermes-maximem-vity 1.3.0", "its description: Vity by Maximem AI (a service)"),
    ("hermes-memanto 0.1.1", "its description: backed by Moorcheh (a service)"),
    (
        "hermes-membase 0.2.0",
        "Membase's API (`membase_hermes/config.py`:11, `https://api.membase.so`) signed in with "
        "OAuth (`hermes membase login`, `membase_hermes/provider.py`:203-206); `initialize` "
        "(:243-275) builds its client with those tokens",
    ),
    ("hermes-memori 0.1.8", "its description: Memori Labs' service"),
    ("hermes-memory-libravdb 0.7.0", "its description: LibraVDB over gRPC (a server)"),
    ("hermes-memory-pgvector 1.0.0, hexus 0.9.2", "their descriptions: Postgres with pgvector"),
    ("hermes-memoryrouter 0.1.1", "its description: MemoryRouter (a service)"),
    (
        "hermes-memra 4.5.0",
        "Memra's API: its cloud (`https://usememra.com/api/v1`, an API key) or, in local mode, the "
        "memra-local server at `http://127.0.0.1:8765/v1` (`hermes_memra/__init__.py`:78-80, "
        ":155-168); `is_available` (:287-289) wants a key and a project",
    ),
    (
        "hermes-mnemory 0.1.0",
        "not a memory provider: `register(ctx)` (`hermes_mnemory/__init__.py`:25-52) registers "
        "hooks and tools, no `MemoryProvider`; and a Mnemory server (`MNEMORY_URL` required, "
        "`hermes_mnemory/config.py`:70-72)",
    ),
    ("hermes-mnemostack 1.0.3", "its description: a mnemostack service or a Qdrant server"),
    ("hermes-mongodb-memory 0.2.0", "its description: MongoDB (a server)"),
    ("hermes-muninndb-plugin 0.3.0", "its description: MuninnDB (a server)"),
    ("hermes-neo4j-context-graph 0.1.0a0", "its description: Neo4j (a server)"),
    ("hermes-next 0.7.1", "its description: OpenViking storage and the MemOS engine (servers)"),
    ("hermes-nexusyn 1.0.0", "its description: server-side distillation (a service)"),
    ("hermes-onemem 0.2.0", "its description: records sessions on the Sui chain (the network)"),
    ("hermes-plugin-qdrant-memory 0.5.1", "its description: Qdrant (a server)"),
    (
        "hermes-semantic-memory 0.1.0",
        "an embedding backend: `initialize` (`hermes_semantic_memory/provider.py`:79-91) raises "
        "without one of a vLLM server, sentence-transformers' `all-MiniLM-L6-v2` from Hugging Face "
        "(the `embeddings` extra) or an embeddings API key "
        "(`hermes_semantic_memory/capture.py`:55-101, :213-260)",
    ),
    ("hermes-tiered-memory 1.0.2", "its description: Hindsight as its second tier (a server)"),
    ("hermes-xmemo 1.2.1", "its description: XMemo (a service)"),
    ("hindsight-hermes 0.5.0", "its description: Hindsight (a server or its cloud)"),
    (
        "hologram-cognitive 0.4.0",
        "its `hologram` command, run as a process: the shim "
        "(`hologram/data/hermes_plugin/__init__.py`:87) keeps a `hologram hook hermes serve` "
        "worker (`subprocess.Popen`) and falls back to one call each (:174, `subprocess.run`); "
        "memspec's driver starts no process of a provider's",
    ),
    ("hydradb-hermes 1.0.2", "its description: HydraDB (a service)"),
    (
        "keepsake-memory 1.1.1",
        "a Redis server with RediSearch: `initialize` (`keepsake/__init__.py`:286-320) opens "
        "`RedisStorage` at `127.0.0.1:6379` (`keepsake/storage.py`:207-217)",
    ),
    (
        "knos-hermes 0.1.0",
        "a broken dependency: it requires `knos>=0.1.1`, which installs knos 0.4.0, a metering "
        "tool without the `knos.memory` and `knos.answer` the plugin imports for every recall, "
        "write and shutdown (`knos_hermes/plugin/__init__.py`:116, :136-137, :240-241)",
    ),
    ("memex-hermes 0.2.2", "its description: the memex-mvp corpus (a service)"),
    ("memorylake-hermes 1.1.3", "its description: MemoryLake (a service, with web search)"),
    ("mnemopay-hermes 1.1.1", "its description: a micropayment wallet (an account)"),
    (
        "mowave-loci 0.1.0",
        "not a memory provider: `register(ctx)` "
        "(`loci/adapters/hermes_plugin/__init__.py`:128-135) registers three tools and the "
        "`pre_llm_call` and `post_llm_call` hooks, no `MemoryProvider`",
    ),
    ("next-wiki-hermes-memory 0.3.0", "its description: next-wiki's memory API (a server)"),
    ("pacomind-hermes 1.8.4", "its description: PacoMind (a service)"),
    (
        "plur-hermes 0.22.1",
        "the `plur` command (Node), run as a process for every read and write "
        "(`plur_hermes/bridge.py`:163-205), else `npx @plur-ai/cli` fetched from npm (:312-315); "
        "memspec's driver starts no process of a provider's",
    ),
    (
        "protagine-hermes 1.11.0",
        "the Protagine sidecar server (`http://127.0.0.1:7777`) and its API key "
        "(`protagine_memory/provider.py`:363-379, :477-490)",
    ),
    (
        "rag-memory-plugin 1.0.0",
        "not a memory provider: `register(context)` (`rag_memory/plugin.py`:67-151) builds its "
        "store and registers hooks and tools, no `MemoryProvider`",
    ),
    (
        "remnic-hermes 1.0.10",
        "the Remnic daemon's HTTP API on `127.0.0.1:4318` with a bearer token "
        "(`remnic_hermes/config.py`:13-59, `remnic_hermes/client.py`:66-101); `is_available` is "
        "the token (`remnic_hermes/provider.py`:165-166)",
    ),
    ("rushdb-hermes-memory 0.2.0", "its description: RushDB (a server or its cloud)"),
    (
        "sibyl-memory-hermes 0.5.0",
        'an account: "Memory needs an activated account (`sibyl init`) holding a valid, '
        'server-signed entitlement" (`sibyl_memory_hermes/_hermes_plugin/adapter.py`:35-41; '
        "`sibyl_memory_hermes/provider.py`:94-96)",
    ),
    ("sonzai-hermes 1.0.0", "its description: Sonzai (a service)"),
    ("soulchain-hermes 0.3.8", "its description: memory anchored on a chain (Base)"),
    ("spectron-hermes 0.3.0", "its description: SurrealDB (a server)"),
    (
        "tabularius 1.0.0",
        "a language model's API: `is_available` (`tabularius/provider.py`:218-224) needs "
        "`TABULARIUS_API_KEY` or `OPENAI_API_KEY` (`tabularius/llm.py`:63-68), for the OpenAI "
        "client its extraction and recall agents call (:77-92)",
    ),
)
"""The other memory providers on the package index (``NAME VERSION``), each with why it is not
certified here."""
NOT_YET: tuple[tuple[str, str], ...] = ()
"""Memory providers on the index whose descriptions promise local use, not certified yet, each
with why: each is for :data:`SUBJECTS` once memspec can run it as its installation does."""


@dataclass
class Outcome:
    """How one subject's certification ended: ``status`` (memspec's exit status, or ``None``
    when it timed out), the report read back (level, counts, clauses), and the wall time."""

    subject: Subject
    status: int | None
    wall: float
    output: str
    report: dict[str, Any] | None = None

    @property
    def failing(self) -> dict[str, str]:
        """Returns each failing clause with what failed (the first failure of it, without its
        clause prefix)."""
        found: dict[str, str] = {}
        for check in (self.report or {}).get("checks", []):
            if check.get("status") != "failed":
                continue
            failures = check.get("failures") or [
                {"clause": check.get("blamed"), "reason": check.get("reason", "")}
            ]
            for failure in failures:
                clause = str(failure.get("clause") or "")
                reason = str(failure.get("reason") or "").removeprefix(f"{clause}: ")
                found.setdefault(clause, reason.splitlines()[0] if reason else "")
        rows = (self.report or {}).get("clauses", [])
        return {
            row["clause"]: found.get(row["clause"], "") for row in rows if row["status"] == "fail"
        }

    @property
    def unjudged(self) -> dict[str, str]:
        """Returns each clause neither passed nor failed, with its status and why."""
        return {
            row["clause"]: f"{row['status']}: {'; '.join(row.get('why') or []) or 'not judged'}"
            for row in (self.report or {}).get("clauses", [])
            if row["status"] not in ("pass", "fail")
        }

    def figure(self, name: str) -> Any:
        """Returns the figure ``name`` of the first check that has it, or ``None``."""
        for check in (self.report or {}).get("checks", []):
            if name in (check.get("figures") or {}):
                return check["figures"][name]
        return None


def interpreter(subject: Subject, cache: Path) -> Path:
    """Returns the interpreter of the environment ``subject`` runs in, building it if needed
    (with ``subject.python`` where it names one); raises UsageError when the environment the
    cache holds was built with another interpreter than ``subject.python``."""
    beside = None
    if subject.package is not None:
        name, _, version = subject.package.partition("==")
        beside = Release(name, version)
    python = ensure_venv(HERMES, cache, subject.python, beside=beside)
    if subject.python is not None:
        built_with(python, subject.python)
    return python


def built_with(python: Path, wanted: str) -> None:
    """Raises UsageError unless the environment of ``python`` was built with the interpreter
    ``wanted`` (the same base installation): memspec's cache names an environment by the
    releases it holds, not by the interpreter that built it."""
    ask = "import sys; print(sys.base_prefix)"
    bases = [
        subprocess.run(
            [str(command), "-I", "-c", ask], capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()
        for command in (python, wanted)
    ]
    if bases[0] != bases[1]:
        raise UsageError(
            f"{python.parent.parent} was built with the Python of {bases[0]}, not {wanted}: "
            "remove it (memspec builds it again) or give --cache another directory"
        )


def certify_arguments(subject: Subject, python: Path, scratch: Path) -> list[str]:
    """Returns the arguments of ``memspec provider`` for ``subject``, running its installer into
    ``scratch`` first where it has one."""
    arguments = ["--package", subject.package] if subject.package else []
    if subject.python is not None:
        arguments += ["--python", subject.python]
    if subject.home_setup:
        setup = [part.replace("{python}", str(python)) for part in subject.home_setup]
        setup[0] = str(python.parent / setup[0])
        arguments += ["--home-setup", shlex.join(setup)]
    if subject.bundled is not None:
        found = subprocess.run(
            [str(python), "-I", "-c", "import plugins.memory as m; print(m.__path__[0])"],
            capture_output=True,
            text=True,
            check=True,
        )
        return [*arguments, str(Path(found.stdout.strip()) / subject.bundled)]
    if subject.installer:
        home = scratch / "hermes-home"
        home.mkdir(parents=True, exist_ok=True)
        command = [part.replace("{home}", str(home)) for part in subject.installer]
        command[0] = str(python.parent / command[0])
        environment = {**os.environ, "HOME": str(home), "HERMES_HOME": str(home)}
        subprocess.run(command, env=environment, capture_output=True, check=True, timeout=300)
        return [*arguments, str(home / subject.plugin)]
    return arguments


def certify(subject: Subject, cache: Path, out: Path, profile: str) -> Outcome:
    """Certifies ``subject`` at ``profile``, its reports under ``out/<key>``; returns the
    outcome."""
    python = interpreter(subject, cache)
    report = out / subject.key
    with tempfile.TemporaryDirectory(prefix="memspec-sweep-") as scratch:
        arguments = certify_arguments(subject, python, Path(scratch))
        command = [sys.executable, "-m", "memspec.conformance", "provider", *arguments]
        command += ["--cache", str(cache), "--profile", profile, "--report", str(report), "-q"]
        started = time.monotonic()
        try:
            done = subprocess.run(
                command,
                cwd=PROJECT,
                env={**os.environ, **subject.environment},
                capture_output=True,
                text=True,
                timeout=CERTIFY_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Outcome(subject, None, time.monotonic() - started, "timed out")
        wall = time.monotonic() - started
    try:
        read = json.loads((report / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        read = None
    return Outcome(subject, done.returncode, wall, done.stdout + done.stderr, read)


def unsettled(outcomes: Sequence[Outcome]) -> list[str]:
    """Returns what a person must settle: each failing clause without its note, each note whose
    clause no longer fails, each subject whose certification did not finish."""
    found = []
    for outcome in outcomes:
        key = outcome.subject.key
        if outcome.report is None:
            last = (outcome.output.strip().splitlines() or ["no output"])[-1]
            found.append(f"{key}: no report ({last})")
            continue
        failing = outcome.failing
        found += [
            f"{key}: {clause} fails, no note" for clause in failing if (key, clause) not in NOTES
        ]
        found += [
            f"{key}: the note on {clause} is stale (it no longer fails)"
            for (subject, clause) in NOTES
            if subject == key and clause not in failing
        ]
    return found


def _seconds(value: Any) -> str:
    return f"{value:.2f} s" if isinstance(value, int | float) else "–"


def render_page(outcomes: Sequence[Outcome], profile: str) -> str:
    """Returns the body of the page: the table of subjects, each failing clause argued, and the
    providers not certified, each with why."""
    lines = [
        f"{len(outcomes)} Hermes memory providers that run on one machine without an account, "
        f"each certified with `memspec provider` in hermes-agent {DEFAULT_HERMES} (profile "
        f"`{profile}`), the network refused, as a user installs it. Each clause a provider fails "
        "is argued below from its own code (file and line of the version certified).",
        "",
        "| provider | level | passed | failed | not judged | failing clauses | initialize | "
        "slowest prefetch | slowest sync_turn | certify |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for outcome in outcomes:
        report = outcome.report or {}
        summary = report.get("summary", {})
        level = report.get("level", {}).get("name", "–") if report else "no report"
        lines.append(
            f"| {outcome.subject.title} | {level} | {summary.get('passed', '–')} | "
            f"{summary.get('failed', '–')} | {len(outcome.unjudged)} | "
            f"{', '.join(outcome.failing) or 'none'} | "
            f"{_seconds(outcome.figure('initialize_s'))} | "
            f"{_seconds(outcome.figure('prefetch_max_s'))} | "
            f"{_seconds(outcome.figure('sync_turn_max_s'))} | {outcome.wall:.0f} s |"
        )
    for outcome in outcomes:
        lines += ["", f"## {outcome.subject.title}", "", f"Installed: {outcome.subject.how}."]
        run = (outcome.report or {}).get("run", {})
        if run:
            features = ", ".join(run.get("features") or []) or "nothing optional"
            lines.append(f"Name `{run.get('name')}`, claims {features}.")
        if outcome.report is None:
            lines += ["", f"No report: {outcome.output.strip()[-500:]}"]
            continue
        for clause, failure in outcome.failing.items():
            note = NOTES.get((outcome.subject.key, clause), "(not argued yet)")
            lines += ["", f"- **{clause}** fails: {failure}", f"  {note}"]
        for clause, why in outcome.unjudged.items():
            lines += ["", f"- {clause} {why}"]
    lines += [
        "",
        "## Not certified here",
        "",
        "The other memory providers on the package index need what one machine with the network "
        "refused does not have:",
        "",
        "| package | why |",
        "|---|---|",
    ]
    lines += [f"| {package} | {why} |" for package, why in ELSEWHERE]
    if not NOT_YET:
        lines += [
            "",
            "Every other memory provider on the index whose description promises local use is "
            "certified above.",
        ]
        return "\n".join(lines)
    lines += [
        "",
        "Not certified yet, though their descriptions promise local use, each for the reason "
        "beside it:",
        "",
        "| package | why not yet |",
        "|---|---|",
    ]
    lines += [f"| {package} | {why} |" for package, why in NOT_YET]
    return "\n".join(lines)


FIGURES = ("initialize_s", "prefetch_max_s", "sync_turn_max_s")
"""The figures of a subject the page and its JSON show: the slowest call of each hook."""


def run_json(outcomes: Sequence[Outcome], profile: str) -> dict[str, Any]:
    """Returns the run as the JSON ``--json`` writes (its schema is in the module docstring):
    each subject's outcome and verdicts, each failing clause with its note, and the providers
    not certified."""
    subjects = []
    for outcome in outcomes:
        subject, report = outcome.subject, outcome.report
        level = (report or {}).get("level", {})
        subjects.append(
            {
                "key": subject.key, "title": subject.title, "how": subject.how,
                "package": subject.package, "bundled": subject.bundled,
                "environment": dict(subject.environment),
                "status": outcome.status, "wall": outcome.wall,
                "level": level.get("name") if report else None,
                "blocked_by": list(level.get("blocked_by") or []),
                "counts": report.get("summary") if report else None,
                "not_judged": len(outcome.unjudged),
                "verdicts": [
                    {"clause": row["clause"], "status": row["status"],
                     "why": "; ".join(row.get("why") or [])}
                    for row in (report or {}).get("clauses", [])
                ],
                "failing": [
                    {"clause": clause, "failure": failure,
                     "note": NOTES.get((subject.key, clause))}
                    for clause, failure in outcome.failing.items()
                ],
                "unjudged": [{"clause": c, "why": why} for c, why in outcome.unjudged.items()],
                "figures": {name: outcome.figure(name) for name in FIGURES},
                "output": None if report else outcome.output.strip()[-500:],
            }
        )  # fmt: skip
    clauses = installed_spec().of_subject("provider").clauses
    return {
        "sweep": "providers",
        "hermes": DEFAULT_HERMES,
        "profile": profile,
        "clauses": [{"clause": clause.id, "level": clause.level} for clause in clauses],
        "subjects": subjects,
        "elsewhere": [{"package": package, "why": why} for package, why in ELSEWHERE],
        "not_yet": [{"package": package, "why": why} for package, why in NOT_YET],
        "unsettled": unsettled(outcomes),
    }


def writable_json(path: str) -> str | None:
    """Returns why ``path`` cannot take the JSON (its directory is missing, or it is a
    directory), or None."""
    target = Path(path).absolute()
    if not target.parent.is_dir():
        return f"--json {path}: no such directory"
    if target.is_dir():
        return f"--json {path}: is a directory, not a file"
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Certify real Hermes memory providers; write the results page."
    )
    parser.add_argument(
        "-k",
        dest="words",
        metavar="WORD",
        action="append",
        default=[],
        help="subjects whose key holds WORD",
    )
    parser.add_argument(
        "--profile", metavar="NAME", default="ci", help="the certification profile (default ci)"
    )
    parser.add_argument(
        "--out", metavar="DIR", help="keep each subject's reports and the run there"
    )
    parser.add_argument("--cache", metavar="DIR", help="where Hermes environments are kept")
    parser.add_argument("--page", metavar="FILE", help="write the results page there")
    parser.add_argument(
        "--json", metavar="FILE", help="also write the run as JSON (what memspec site renders)"
    )
    parser.add_argument(
        "--from",
        dest="source",
        metavar="DIR",
        help="render the run kept in DIR by --out instead of certifying (after NOTES changed)",
    )
    return parser


def save_run(outcomes: Sequence[Outcome], out: Path, run: PageRun) -> None:
    """Writes what :func:`read_run` needs beside the reports in ``out``: each subject's exit
    status, wall time and output, and (in ``run.json``) the date and machine of the run. The
    subjects of a run kept there before stay, but those certified again: ``-k`` adds to a kept
    run (``run.json`` then names the last run)."""
    try:
        kept = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        kept = {}
    if not isinstance(kept, dict):
        kept = {}
    for o in outcomes:
        kept[o.subject.key] = {"status": o.status, "wall": o.wall, "output": o.output}
    (out / "sweep.json").write_text(json.dumps(kept, indent=1), encoding="utf-8")
    certified = {"date": run.date.isoformat(), "machine": run.machine}
    (out / "run.json").write_text(json.dumps(certified, indent=1), encoding="utf-8")


def rendered_from(source: Path, run: PageRun) -> PageRun:
    """Returns ``run`` (which renders a kept run) stamped with the date and machine of the run
    kept in ``source`` (its ``run.json``), whose figures the page shows; ``run`` itself when
    none is kept (raises OSError or ValueError for a ``run.json`` that is not the one kept)."""
    path = source / "run.json"
    if not path.exists():
        return run
    kept = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(kept, dict) or not {"date", "machine"} <= kept.keys():
        raise ValueError("its run.json is not the one --out keeps")
    return PageRun(run.command, dt.date.fromisoformat(kept["date"]), str(kept["machine"]))


def read_run(source: Path, subjects: Sequence[Subject]) -> list[Outcome]:
    """Returns the outcomes of the run kept in ``source`` (by ``--out``), for ``subjects``
    (raises OSError, ValueError, KeyError or TypeError for a run that is not kept there)."""
    kept = json.loads((source / "sweep.json").read_text(encoding="utf-8"))
    if not isinstance(kept, dict):
        raise ValueError("its sweep.json is not the one --out keeps")
    outcomes = []
    for subject in subjects:
        if subject.key not in kept:
            continue
        entry = kept[subject.key]
        try:
            report = json.loads((source / subject.key / "report.json").read_text("utf-8"))
        except (OSError, ValueError):
            report = None
        if not isinstance(report, dict):
            report = None
        outcomes.append(Outcome(subject, entry["status"], entry["wall"], entry["output"], report))
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command; returns its exit status."""
    args = build_parser().parse_args(argv)
    run = PageRun.start(PROG, argv)
    subjects = [s for s in SUBJECTS if not args.words or any(w in s.key for w in args.words)]
    if not subjects:
        print(f"{PROG}: error: no subject matches {args.words}", file=sys.stderr)
        return 2
    if args.page and writable_page(args.page):
        print(f"{PROG}: error: {writable_page(args.page)}", file=sys.stderr)
        return 2
    if args.json and writable_json(args.json):
        print(f"{PROG}: error: {writable_json(args.json)}", file=sys.stderr)
        return 2
    cache = cache_dir(args.cache)
    with tempfile.TemporaryDirectory(prefix="memspec-providers-") as temporary:
        out = Path(args.out).absolute() if args.out else Path(temporary)
        out.mkdir(parents=True, exist_ok=True)
        if args.source:
            try:
                outcomes = read_run(Path(args.source), subjects)
                run = rendered_from(Path(args.source), run)
            except (OSError, ValueError, KeyError, TypeError) as error:
                print(
                    f"{PROG}: error: cannot read the run in {args.source}: {error}", file=sys.stderr
                )
                return 2
            subjects = []
        else:
            outcomes = []
        for subject in subjects:
            print(f"{PROG}: certifying {subject.title}", flush=True)
            try:
                outcome = certify(subject, cache, out, args.profile)
            except (UsageError, subprocess.SubprocessError) as error:
                outcome = Outcome(subject, None, 0.0, f"could not be prepared: {error}")
            outcomes.append(outcome)
            failing = ", ".join(outcome.failing) or "none"
            print(f"  status {outcome.status}, {outcome.wall:.0f} s, failing: {failing}")
        if args.out and not args.source:
            save_run(outcomes, out, run)
    if args.page:
        body = render_page(outcomes, args.profile)
        run.write(args.page, "Real Hermes memory providers", body)
        print(f"{PROG}: wrote {args.page}")
    if args.json:
        try:
            Path(args.json).write_text(
                json.dumps(run_json(outcomes, args.profile), indent=1) + "\n", encoding="utf-8"
            )
        except OSError as error:
            print(f"{PROG}: error: cannot write {args.json}: {error.strerror}", file=sys.stderr)
            return 2
        print(f"{PROG}: wrote {args.json}")
    problems = unsettled(outcomes)
    for problem in problems:
        print(f"{PROG}: to settle: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
