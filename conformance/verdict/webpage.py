"""The page kit of memspec's HTML: one self-contained page (inline style, at most one inline
script, no network, font or external file), the mark of a clause verdict, and a
character-level diff of two values with every invisible character shown as the terminal
shows it (:func:`~memspec.conformance.verdict.diffs.visible`).

Everything a backend sent is untrusted text: it reaches a page only through :func:`esc`. The
page's Content-Security-Policy allows its own inline style and the one script of the hash
given, nothing else, so even a slip of escaping could not run a script or reach the network.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import html
import json
from typing import Any

from memspec.conformance.verdict.diffs import first_difference, visible

MARKS = {
    "pass": "✓",
    "fail": "✗",
    "expected fail": "✗",
    "skip": "–",
    "n/a": "○",
    "unchecked": "?",
}
"""The symbol beside each clause verdict's word: the verdict never reads from colour alone."""
DIFF_LIMIT = 6_000
"""Characters of two values' JSON beyond which :func:`diff` gives the first difference alone
(a character-level diff takes time quadratic in their length)."""

STYLE = """
:root{--pass:#0072b2;--fail:#c2410c;--skip:#8a6d00;--na:#6b6b6b;--ink:#1d1d1d;--line:#c9c9c9;
--bg-pass:#e3effa;--bg-fail:#fde4d6;--bg-skip:#fbf3c9;--bg-na:#efefef}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--ink);margin:0;
padding:1rem;max-width:72rem;margin-inline:auto;overflow-wrap:anywhere}
h1{font-size:1.35rem;margin:.2rem 0 .6rem}h2{font-size:1.15rem;margin:1.4rem 0 .5rem}
h3{font-size:1rem;margin:1rem 0 .3rem}
a{color:#005a8c}:focus-visible{outline:3px solid #000;outline-offset:2px}
.level{font-size:1.2rem;font-weight:700;padding:.6rem .8rem;border-left:.5rem solid var(--na);
background:var(--bg-na);margin:.4rem 0}
.level.l-full{border-color:var(--pass);background:var(--bg-pass)}
.level.l-none,.level.l-safe,.level.l-core{border-color:var(--fail);background:var(--bg-fail)}
.counts{font-weight:600}
dl.run{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .8rem;margin:.5rem 0}
dl.run dt{font-weight:600}dl.run dd{margin:0}
.mark{display:inline-block;min-width:6.5em;padding:0 .35em;border-radius:.25em;font-weight:700;
border:1px solid currentColor;white-space:nowrap}
.v-pass{color:var(--pass);background:var(--bg-pass)}
.v-fail,.v-expected-fail{color:var(--fail);background:var(--bg-fail)}
.v-skip,.v-unchecked{color:var(--skip);background:var(--bg-skip)}
.v-na{color:var(--na);background:var(--bg-na)}
.clause{border:1px solid var(--line);border-radius:.3rem;margin:.3rem 0}
.clause>details>summary{padding:.35rem .5rem;cursor:pointer;display:flex;flex-wrap:wrap;
gap:.2rem .6rem;align-items:baseline}
.clause .cid{font-weight:700;font-family:ui-monospace,monospace}
.clause .why{flex-basis:100%;color:#333}
.clause .body{padding:.2rem .8rem .6rem}
blockquote{margin:.3rem 0;padding:.2rem .7rem;border-left:.25rem solid var(--line);color:#333}
pre,code,.diff{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.85rem}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5rem;border:1px solid #e2e2e2;
max-height:30rem;overflow:auto;margin:.3rem 0}
.evidence{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .6rem;margin:.3rem 0}
.evidence dt{font-weight:600}.evidence dd{margin:0;font-family:ui-monospace,monospace;
font-size:.85rem;white-space:pre-wrap}
.diff{white-space:pre-wrap;background:#fafafa;border:1px solid #e2e2e2;padding:.4rem}
.diff del{background:#fdd9c4;text-decoration:line-through;text-decoration-thickness:2px}
.diff ins{background:#cde4f7;text-decoration:underline;text-decoration-thickness:2px}
.filters{display:flex;flex-wrap:wrap;gap:.4rem 1rem;align-items:center;padding:.5rem;
border:1px solid var(--line);border-radius:.3rem;margin:.6rem 0}
.filters fieldset{border:0;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:.2rem .7rem}
.filters legend{font-weight:600;float:left;margin-right:.4rem}
table{border-collapse:collapse;margin:.4rem 0}
th,td{border:1px solid var(--line);padding:.2rem .45rem;text-align:left;vertical-align:top}
th{background:#f2f2f2}th,td{overflow-wrap:normal}
.scroll{overflow-x:auto;max-width:100%}
.grid td{white-space:nowrap;text-align:center}.grid th[scope=row]{white-space:nowrap}
figure{margin:.6rem 0}figure svg{max-width:100%;height:auto}
ul.inline{display:flex;flex-wrap:wrap;gap:.2rem 1.1rem;padding-left:1.1rem}
nav ul.inline{list-style:none;padding:0}
[hidden]{display:none!important}
"""


def esc(text: object) -> str:
    """Returns ``text`` as HTML text: every ``<``, ``>``, ``&`` and quote escaped, a lone
    surrogate as its escape (``\\ud800``) so the page stays UTF-8."""
    value = str(text)
    value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return html.escape(value, quote=True)


def mark(status: str) -> str:
    """Returns the badge of a clause verdict: its symbol and its word, coloured by a class
    (``v-pass``, ``v-fail``, …) that colour never carries alone."""
    css = "v-" + status.replace("/", "").replace(" ", "-")
    return f'<span class="mark {css}">{MARKS.get(status, "")} {esc(status)}</span>'


def shown(value: Any, limit: int = 4000) -> str:
    """Returns a JSON value as the terminal shows it: JSON text with every invisible or
    ambiguous character written as its escape, cut after ``limit`` characters."""
    text = visible(json.dumps(value, ensure_ascii=False))
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more)"


def diff(expected: Any, received: Any, said: str = "") -> str:
    """Returns the character-level difference of two JSON values as HTML: the first
    difference in words (:func:`~memspec.conformance.verdict.diffs.first_difference`; left out
    when ``said``, the text shown above it, already says it), then the
    expected text with what the received one lacks struck through (``<del>``) and the received
    text with what it adds underlined (``<ins>``), each character as the terminal shows it; ""
    when the values are equal or of different kinds (nothing to compare character by
    character); for values longer than :data:`DIFF_LIMIT`, the first difference alone."""
    if expected == received or type(expected) is not type(received):
        return ""
    want = json.dumps(expected, ensure_ascii=False)
    got = json.dumps(received, ensure_ascii=False)
    where = first_difference(expected, received)
    lead = f"<p>{esc(where)}</p>" if where and where not in said else ""
    if len(want) + len(got) > DIFF_LIMIT:
        return lead
    old, new = [], []
    matcher = difflib.SequenceMatcher(None, want, got, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        left, right = esc(visible(want[i1:i2])), esc(visible(got[j1:j2]))
        if op == "equal":
            old.append(left)
            new.append(right)
            continue
        if i2 > i1:
            old.append(f"<del>{left}</del>")
        if j2 > j1:
            new.append(f"<ins>{right}</ins>")
    return (
        f'{lead}<div class="diff" role="group" aria-label="difference">'
        f"expected: {''.join(old)}\nreceived: {''.join(new)}</div>"
    )


def script_hash(script: str) -> str:
    """Returns the Content-Security-Policy source that allows exactly ``script``."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def page(title: str, body: str, script: str = "") -> str:
    """Returns a whole self-contained page: ``body`` (HTML, already escaped) under ``title``,
    the kit's style, and ``script`` (inline, allowed by its hash alone) at the end."""
    allowed = script_hash(script) if script else "'none'"
    policy = (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {allowed}; "
        "base-uri 'none'; form-action 'none'"
    )
    tail = f"<script>{script}</script>" if script else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n"
        f"<body>\n{body}\n{tail}</body></html>\n"
    )
