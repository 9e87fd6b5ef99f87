"""Data over strings: the package never parses back text it printed itself (issue 28).

Each pattern below is a way the project once recovered structure from its own output: the kind of an action from
its label (``"send(p0, 3)".split("(")``), a state's component from the prefix of a ``describe_state`` line, a
pattern of the abstraction's difference table split at ``.``, a missing value recognised by its ``(``, a chaos
transaction's id and instance split at ``#``, a consume-transform-produce output's input split at ``>``, a
``partition@offset`` split at ``@``, a verdict cell judged by its first word, a nemesis process by its prefix, a
group member's client id read back out of the member id made from it, a response told by its class name's
ending, a segment's base offset cut out of the file name built from it, a partition handed to the implementation
as ``topic-0`` text for it to parse back.
Each now travels as a typed value (``checker.model.Label``, ``spec.model.state_notes``,
``conformance.abstraction.PathPattern``/``Absent``, the history's ``tid``/``instance``/``input`` fields,
``audit.chaos.validate.Place``, ``impl.membership.Member.client_id``, ``spec.network.is_request``,
``impl.storage.BASE_OFFSET``) and text is only rendered for reports. A module that parses text a person or
another program wrote (a Kafka version, a host:port, a file format) is not concerned, and not matched here.

Every pattern is shown to match the line it replaced (:data:`REMOVED`), so a pattern that matches nothing cannot
pass unnoticed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("spec", "checker", "impl", "serve", "conformance", "audit", "cli")

# name -> (the parsing it forbids, why the structure is data instead)
FORBIDDEN: dict[str, tuple[re.Pattern[str], str]] = {
    "label split at '('": (re.compile(r"""\.r?split\(\s*["']\\?\(["']"""),
                           "an action's kind is its `kind` attribute (checker.model.Label)"),
    "split at '.' of a dotted path": (re.compile(r"""(pattern|path|key|name|where)\.r?split\(\s*["']\.["']"""),
                                      "a path pattern is a tuple with ANY (conformance.abstraction.PathPattern)"),
    "split or partition at '#', '>' or '@'": (
        re.compile(r"""\.r?(split|partition)\(\s*["'][#>@]["']"""),
        "chaos names are opaque: tid/instance from the begin call, the output's `input` field, validate.Place"),
    "'>' looked for in a value": (re.compile(r"""["']>["']\s+(not\s+)?in\s+(str\()?(value|s\.|name)"""),
                                  "a consume-transform-produce send names its input (`input`)"),
    "text recognised by its '('": (re.compile(r"""\.startswith\(\s*["']\(["']"""),
                                   "a missing side of a difference is conformance.abstraction.Absent"),
    "describe_state line picked by its prefix": (
        re.compile(r"""\.startswith\(\s*(\(\s*)?["'](producer-|in flight|coordinator\[)|_NOT_STATE"""),
        "the diagram's notes are spec.model.state_notes (typed per component)"),
    "first word of a rendered cell": (re.compile(r"""\.split\(\s*["'] ["']\s*\)\[0\]"""),
                                      "a verdict cell is matched whole"),
    "process name by its prefix": (re.compile(r"""process\.startswith\("""),
                                   "the nemesis processes are named constants (history.NEMESIS, NEMESIS_CLIENTS)"),
    "a member id matched for its client id": (re.compile(r"""\.(match|search|fullmatch)\(\s*[\w.]*member_id\b"""),
                                              "a member keeps its JoinGroup's client id (Member.client_id)"),
    "a class told by its name": (
        re.compile(r"""__name__\.(starts|ends)with\(|\.(starts|ends)with\(\s*["'](Response|Request)["']"""),
        "a message's kind is its type (spec.network.is_request, isinstance)"),
    "a partition named as text": (re.compile(r"""f["']\{\w+\}-0["']"""),
                                  "a partition is a TopicPartition (impl.topic_partition), read by its fields"),
    "a constant's text cut apart": (re.compile(r"""\b[A-Z][A-Z0-9_]{2,}\.r?(split|partition)\("""),
                                    "what a constant is built from is a constant too (impl.storage.BASE_OFFSET)"),
}

# the lines the patterns replaced, each with the pattern that must catch it
REMOVED: dict[str, str] = {
    "label split at '('": 'return action.split("(", 1)[0].strip()',
    "split at '.' of a dotted path": 'parts = pattern.split(".")',
    "split or partition at '#', '>' or '@'": 'tid, _, rest = str(name).partition("#")',
    "'>' looked for in a value": 'if t.tid not in group_of and any(">" in str(s.invoke.value.get("value")) for s in t)',
    "text recognised by its '('": 'return value if isinstance(value, str) and value.startswith("(") else value',
    "describe_state line picked by its prefix": 'if line not in old and not line.startswith(_NOT_STATE))',
    "first word of a rendered cell": 'word = text.split(" ")[0].lower()',
    "process name by its prefix": "return process.startswith(NEMESIS)",
    "a member id matched for its client id": "own = _GENERATED_MEMBER_ID.match(member.member_id)",
    "a class told by its name": 'if name.endswith("Response"):',
    "a partition named as text": 'self.broker.partition(f"{topic}-0")',
    "a constant's text cut apart": 'self.base_offset = int(SEGMENT.split(".")[0])',
}
MORE_REMOVED = ('source, _, name = value.partition(">")', 'tp, _, offset = where.partition("@")',
                'if ">" in value:', '_NOT_STATE = ("producer-", "in flight")',
                'if type(body).__name__.endswith("Response"):')


def sources() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def parsing_of_own_strings() -> list[str]:
    found = []
    for path in sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.lstrip().startswith("#"):
                continue
            for name, (pattern, why) in FORBIDDEN.items():
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {name} ({why}): {line.strip()}")
    return found


def test_the_package_parses_none_of_its_own_strings() -> None:
    assert parsing_of_own_strings() == []


def test_each_pattern_catches_the_line_it_replaced() -> None:
    assert set(REMOVED) == set(FORBIDDEN)
    for name, line in REMOVED.items():
        assert FORBIDDEN[name][0].search(line), name
    for line in MORE_REMOVED:
        assert any(pattern.search(line) for pattern, _ in FORBIDDEN.values()), line


def test_the_scan_reads_every_module_of_the_package() -> None:
    files = {str(p.relative_to(ROOT)) for p in sources()}
    assert {"checker/report.py", "cli/html_report.py", "conformance/abstraction.py", "audit/chaos/anomalies.py",
            "audit/chaos/validate.py"} <= files
    assert len(files) > 150
