"""Why real backends fail a clause: one line of reasoning per clause id, for the matrix page.

The matrix is measured; these lines, written by reading Hermes' code, say what a measured failure
means for a user. ``memspec matrix --page FILE`` renders the line of each failing clause ("(no
explanation yet)" when it has none). ``#N`` is the NousResearch/hermes-agent issue of the same bug.
"""

from __future__ import annotations

NO_EXPLANATION = "(no explanation yet)"

_BY_GROUP: dict[tuple[str, ...], str] = {
    ("FORMAT-4", "DRIFT-1"): (
        "a file with a BOM, CRLF line ends or spaces around `§` is parsed on the exact bytes "
        '`"\\n§\\n"` only, so a rewrite glues entries together instead of writing the canonical '
        "form."
    ),
    ("FORMAT-5", "ENTRY-3", "REPLACE-2", "CONTRACT-4"): (
        "content holding a line that is `§` alone is accepted and comes back as two entries "
        "(#54403); a replace checks the match before the content."
    ),
    ("LIMIT-3",): '`add "§"` is acknowledged, but the file then holds no entry at all.',
    ("READ-1",): (
        "a UTF-8 BOM is glued to the first entry (#10878), which then matches nothing and is "
        "blocked by the scanner as an invisible character."
    ),
    ("READ-3",): (
        "blank lines or spaces around a `§` line are not a delimiter: neighbouring entries merge "
        "into one (the file shape of #61523)."
    ),
    ("READ-4",): "a trailing `§` or blank piece reads as an entry `§`.",
    ("READ-5", "DUP-4", "MATCH-4", "MATCH-5", "CONTRACT-3"): (
        "duplicates on disk are dropped at load, and the next rewrite deletes them from the "
        "file: an entry another writer added twice loses a copy, and the entries the model sees "
        "are not the file's."
    ),
    ("READ-6",): (
        "a file that is not valid UTF-8 makes `load` and every write raise `UnicodeDecodeError`: "
        'memory is unusable until the file is repaired by hand (the "invalid UTF-8 crashed the '
        'write path" bug).'
    ),
    ("READ-7",): (
        "one transient read failure (EIO on reading MEMORY.md, EACCES on opening it) makes "
        "`add` answer success and rewrite MEMORY.md with only the new entry, losing every "
        "acknowledged one; a file that exists but cannot be read is shown as no memory at all."
    ),
    ("SNAP-9",): (
        "a file that exists but cannot be read or decoded is shown as no memory at all, instead "
        "of a block saying it is unreadable: the agent silently runs without its memory."
    ),
    ("ATOMIC-4",): (
        "a write that fails (disk full, EIO on the write, the fsync or the rename) raises "
        "`RuntimeError` out of the memory tool instead of answering `E_IO`; the old file is "
        "kept and no temp file is left."
    ),
    ("CONTRACT-2",): (
        "content that is not a string (an `add` of `42`) raises inside the memory tool instead "
        "of being refused with `E_INVALID`: a malformed tool call from the model crashes the "
        "call rather than telling it what was wrong; the 0.22 line does not execute core's "
        "`replace` at all (see REPLACE-1)."
    ),
    ("CONTRACT-5",): (
        "conditions are reported in another order: hermes-agent crashes on an undecodable file "
        "before looking at the arguments; the async rewrite reports an empty `old_text` before "
        "a content that is not a string."
    ),
    ("REPLACE-1", "MATCH-1"): (
        "CR LF in a replace's new content and in `old_text` is kept: an entry is stored "
        "differently from what was sent, and an `old_text` copied with CR LF never matches; "
        "the 0.22 line refuses `replace` altogether (E_UNSUPPORTED, \"use 'patch'\"), so for it "
        "every other clause an example or check drives through `replace` reads not verified."
    ),
    ("ENTRY-4",): "content with a lone surrogate raises `UnicodeEncodeError` from the write.",
    ("ENTRY-7", "CONTRACT-6"): (
        "a content that is not a string (a number from a sloppy tool call) raises "
        "`AttributeError`, in a batch `TypeError` from the scanner, instead of a refusal."
    ),
    (
        "BATCH-5",
    ): "`operations: []` answers \"Unknown action ''\" instead of refusing an empty batch.",
    ("BATCH-6",): (
        "batch items are scanned for threats before their arguments are checked, so a malformed "
        "item is refused for the wrong reason."
    ),
    ("LIMIT-4",): (
        "a file another writer left over the limit refuses even a replace that does not grow "
        "it: the user can only remove entries."
    ),
    ("MATCH-3",): (
        "an entry contained in a longer one cannot be addressed: an `old_text` equal to a whole "
        "entry is still ambiguous (#109177)."
    ),
    ("SNAP-8",): (
        "the header's usage counts the `[BLOCKED: …]` placeholder instead of the real entries, "
        "so the percentage the model sees is wrong."
    ),
    ("SNAP-6",): "the percentage uses float division: 29/100 shows as 28%.",
    ("SCAN-2",): (
        "hard-coded secrets such as AWS access keys (`AKIA…`) are not refused, and reach every "
        "future prompt."
    ),
    ("SCAN-4", "ENTRY-5"): (
        "ordinary text is refused as invisible Unicode — emoji sequences joined by ZWJ, "
        "Persian and Hindi with ZWNJ, Thai, Khmer and Burmese with ZWSP — while the tag "
        "characters pass, so an instruction written in them (ASCII smuggling) reaches the "
        "prompt unseen by the user."
    ),
    ("SCAN-3",): (
        "invisible characters outside its short list stay in the text the patterns see: a "
        "keyword split by a soft hyphen, a variation selector, a right-to-left mark or a Hangul "
        "filler is not recognised, and the note reaches the prompt."
    ),
    ("SCAN-5",): "only the first 64 KiB are scanned: an injection after that reaches the prompt.",
    ("SCAN-8",): (
        "an entry that already starts with `[BLOCKED:` skips the load-time scan and reaches the "
        "prompt verbatim (#79009)."
    ),
    ("FENCE-1", "CONTRACT-10"): (
        "the frame's note tells the model that recalled text is \"authoritative reference data "
        '… should inform all responses", not informational background, and a text that is '
        'nothing but a tag is framed as an empty block instead of giving `""`.'
    ),
    ("FENCE-2", "FENCE-5"): (
        "the sanitiser keeps `< /`, full-width and HTML-entity disguises of the fence tag, so "
        "recalled text can close the fence and speak as the user."
    ),
    ("FENCE-3",): (
        "the one-pass sanitiser turns `<</memory-context>/memory-context>` into a live closing "
        "tag (#108964)."
    ),
    ("FENCE-4",): (
        "a `[System note: …]` written in recalled text is kept, so recalled text can forge the "
        "frame's own note."
    ),
    ("CRASH-2",): (
        "a writer killed mid-write leaves its `.mem_*.tmp` file, and nothing removes it: temp "
        "files accumulate in the memory directory."
    ),
    ("DRIFT-2", "DRIFT-3", "DRIFT-4"): (
        "`add` skips the drift guard: on a file holding text pasted without delimiters it "
        'answers "limit exceeded" instead of refusing with a backup (and backups are named by '
        "the second, so two in one second overwrite each other)."
    ),
    ("DRIFT-5",): (
        "releases before 0.15.0 have no drift guard and rewrite away text another tool appended "
        "(#26045); from 0.15.0 a file another tool wrote without delimiters, under the limit, "
        "passes the drift check, and one replace rewrites the whole file as the new entry with "
        "no backup (#56464); the 0.22 line refuses even the `remove` of a pasted paragraph "
        "(`E_DRIFT`), which keeps the text but leaves the file beyond the model's repair "
        "(see DRIFT-7)."
    ),
    ("DRIFT-7", "SCAN-7"): (
        "nothing the model can do with the tool brings back a file with an entry over the "
        "limit: the drift guard refuses every mutation of it, the `remove` that would repair it "
        "included, while the `[BLOCKED:` placeholder tells the model to remove the entry "
        "(releases without a drift guard rewrite the file with no backup instead)."
    ),
    ("ENTRY-1",): (
        "`add` strips only the content's ends (`content.strip()`), so an entry with CR LF inside "
        "is written with CR LF, and a file that mixes line ends follows (a Deviations row); from "
        "0.15.0 to 0.17.0 the new drift guard also takes an entry with Unicode spaces around it "
        "for foreign text and refuses an ordinary `add` with `E_DRIFT`."
    ),
    ("SCAN-1",): (
        'before 0.15.0 the write-time scan misses "ignore all previous instructions", so the '
        "note is stored and reaches every later prompt."
    ),
    ("FORMAT-6",): (
        "a `replace` or a batch that changes nothing still rewrites the file, so another "
        "writer's cosmetic bytes are canonicalised and the modification time moves for nothing."
    ),
    ("READ-8",): (
        "a file that is not valid UTF-8 makes `load` raise, so the session has no entries to "
        "report at all (see READ-6)."
    ),
    ("SNAP-11",): (
        "a refusal for the limit gives `usage` as `USED/LIMIT` without the percent and `chars`, "
        "another format than a success's, so a model reads two."
    ),
    ("SNAP-12",): (
        "a file that is not valid UTF-8 makes `load` raise instead of rendering a block with an "
        "`[UNREADABLE:` line (see READ-6)."
    ),
    ("FENCE-7",): (
        "a `[System note:` inside ordinary recalled text is kept instead of being removed or "
        "made inert (see FENCE-4)."
    ),
    ("PROV-4",): (
        "a prefetch is waited for 8 s (`_EXTERNAL_PREFETCH_TIMEOUT_S`), which no configuration "
        "reaches: `MemoryManager` takes an `external_prefetch_timeout`, but the agent never "
        "passes one (#85135; the same in hermes-agent 0.19.0 and the forks of the 0.20 and "
        "0.22 lines): a recall that hangs 5 s holds the turn 5 s and is then sent with it."
    ),
    ("PROV-5",): (
        "(the asyncio line) a provider's tools are injected, then the agent's first tool "
        "snapshot (at `__aenter__` and again at each turn's setup) replaces the tool list and "
        "keeps only `memory`: the active provider's tools never reach the model."
    ),
    ("AGENT-2",): (
        "(the asyncio line) the store is loaded at the first turn, not when the agent starts: "
        "a write made between the start (or a new session) and the first message is in the "
        "first prompt, which then differs from the one the session started with."
    ),
    ("TOOL-4",): (
        "a call without `target` is taken as one for `memory`, and members the schema does not "
        "name (`new_content`) are ignored instead of refused."
    ),
    ("TOOL-6",): (
        "argument text that is not a JSON object is answered without `success`, and a `content` "
        "that is not a string makes the tool raise (`'int' object has no attribute 'strip'`)."
    ),
    ("TOOL-7",): (
        "a refusal carries no `entry_count`, and its `usage` reads `USED/LIMIT` instead of the "
        "snapshot header's label."
    ),
    ("TOOL-11",): (
        'a replace answers only "Entry replaced.", never what it overwrote, so the model '
        "cannot tell which entry its `old_text` chose."
    ),
    ("TOOL-12",): (
        "a failed batch, and a single no-match, list the whole store in `current_entries`."
    ),
    ("TOOL-13",): (
        "`current_entries` and `matches` show a blocked (threat) entry's raw text to the model, "
        "which the snapshot hides behind its `[BLOCKED:` placeholder."
    ),
    ("TOOL-2",): (
        "(the 0.22 line) the schema offers `patch` where `replace` stood, in a single call and "
        "in a batch item: it hides core's `replace`, which the line refuses (REPLACE-1), and "
        "offers a batch item the contract's batch does not take. (The 0.20 line's `new_text`, "
        "an alias of `content`, is a property of its own that TOOL-2 allows.)"
    ),
    ("PATCH-4",): (
        "(the 0.22 line) a patch whose span or new text carries surrounding whitespace or CR LF "
        "is refused as a no-op (`E_INVALID`), though the entry would change."
    ),
    ("PATCH-5",): (
        "(the 0.22 line) the match is checked before the new text: threat content aimed at an "
        "absent span is answered `E_NOMATCH`, not `E_THREAT`."
    ),
    ("PATCH-6",): (
        "(the 0.22 line) a U+FEFF inside ordinary text is refused as an invisible character, "
        "so the example's own entry is never stored (see SCAN-4)."
    ),
    ("PATCH-7",): (
        "(the 0.22 line) a refusal for the limit gives `usage` as `USED/LIMIT`, another format "
        "than a success's (see SNAP-11)."
    ),
    ("PATCH-8",): (
        "(the 0.22 line) a patch that leaves the entry unchanged is refused as an invalid call "
        "instead of being an accepted no-op that writes nothing."
    ),
    ("PATCH-9",): (
        "(the 0.22 line) any write to a file that holds free-form text (an entry longer than "
        "the limit) is refused `E_DRIFT`, where the rules of `replace` keep that text in a "
        "backup and go on (see DRIFT-7)."
    ),
    ("PATCH-10",): (
        "(the 0.22 line) conditions are reported in another order: an empty `old_text` before a "
        "content that is not a string, and the file before the arguments."
    ),
    ("MATCH-2", "PATCH-2"): (
        "(the 0.22 line) an `old_text` equal to one entry once stripped is answered "
        "`E_AMBIGUOUS` when it also lies inside another entry, instead of choosing the equal one."
    ),
    ("FILES-1",): "lock files are created 0644 under umask 022.",
    ("FILES-2",): "every rewrite resets the data file's mode to 0600 (#22889).",
    ("FILES-3",): "a lock file that is a symbolic link is followed and created wherever it points.",
    ("FILES-4",): (
        "a data file that is a symbolic link is written through, to a file outside the memory "
        "directory."
    ),
}

EXPLANATIONS: dict[str, str] = {
    clause: line for group, line in _BY_GROUP.items() for clause in group
}
"""Clause id -> why Hermes' memory tool fails it, one line."""


def explain(clause: str) -> str:
    """Returns the line explaining why ``clause`` fails, or :data:`NO_EXPLANATION`."""
    return EXPLANATIONS.get(clause, NO_EXPLANATION)
