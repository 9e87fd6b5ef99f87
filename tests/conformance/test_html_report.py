"""``--html-out``: self-contained report pages, checked as text and in a real headless Chromium.

The browser test needs Debian's ``chromium`` and ``chromium-driver`` (``bash run.sh test`` installs them when it
runs as root with apt) and selenium; without them it is skipped with the reason. Chromium is started by the
test (headless, through chromedriver on 127.0.0.1), every wait is bounded, and both are stopped by PID.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from txnspec.audit.report import AuditReport, RuleResult
from txnspec.checker.html import render_page
from txnspec.checker.language import language_difference
from txnspec.cli import main
from txnspec.cli.diff import summarise
from txnspec.cli.html_report import audit_page, conform_page, diagram_event, diff_page, notes_of
from txnspec.conformance.generate import random_walk
from txnspec.spec.model import build_model
from txnspec.spec.observe import projection
from txnspec.spec.variants.user import load_variant_file

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "end_txn_keeps_epoch.py"
EXTERNAL = re.compile(r"<script|<link|<img|<iframe|@import|\bsrc=|\bhref=|url\((?!#)", re.IGNORECASE)


def messages(html: str) -> list[int]:
    """The number of message arrows of each diagram of a page."""
    return [svg.count('<g class="message') for svg in html.split("<svg")[1:]]


def assert_self_contained(html: str) -> None:
    assert html.startswith("<!DOCTYPE html>")
    assert not EXTERNAL.search(html), EXTERNAL.search(html)
    assert "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_check_page_has_the_verdicts_and_one_arrow_per_step(tmp_path: Path) -> None:
    out = tmp_path / "check.html"  # an existing folder: a missing one is bad input (exit 2)
    assert main(["check", "--scenario", "retry", "--variant", "no-duplicate-detection", "--property",
                 "no_duplicate_append", "--html-out", str(out)]) == 1
    html = out.read_text()
    assert_self_contained(html)
    assert 'class="verdict bad"' in html and "VIOLATED: 1 of 2 properties fail" in html
    assert '<td class="bad">violated</td>' in html and "no_duplicate_append" in html
    assert messages(html) == [8]  # the pinned 8-step counterexample (tests/spec/test_variants.py)
    # the duplicate append shows beside the step that made it
    assert re.search(r'class="note"[^>]*>p0: \[0:data\(pid=0,e=0,seq=0\) 1:data\(pid=0,e=0,seq=0\)', html)


def test_a_step_of_the_system_model_as_a_diagram_event() -> None:
    model = build_model("tiny")
    state = next(iter(model.init_states()))
    steps = list(model.next_steps(state))
    (action, after), = steps
    event = diagram_event(action, state, after, notes_of(model))
    assert (event.source, event.target, event.label) == ("producer-0", "producer-0", "initTransactions()")
    (deliver, later), = [s for s in model.next_steps(after) if str(s[0]).startswith("deliver")]
    event = diagram_event(deliver, after, later, notes_of(model))
    assert (event.source, event.target) == ("producer-0", "coordinator")
    assert event.label == "InitProducerId(t1, pid=-1, epoch=-1)"
    assert event.notes == ("coordinator[t1]: Empty pid=0 epoch=0 partitions=[]",)


def _diff_html() -> tuple[str, int]:
    name = load_variant_file(EXAMPLE).name
    models = build_model("delayed-end-txn", "current"), build_model("delayed-end-txn", name)
    result = language_difference(*models, projection(models[0].metadata["system"]))
    page = diff_page(summarise("delayed-end-txn", ("current", name), "application", result), result, models)
    trace = result.only[1]
    assert result.only[0] is None and trace is not None
    return render_page(page), len(trace.steps) - 1


def test_diff_page_draws_the_difference() -> None:
    html, steps = _diff_html()
    assert_self_contained(html)
    assert messages(html) == [steps]
    assert "only end-txn-keeps-epoch: producer-0 is FATAL_ERROR; P0t1 told fatal" in html


def test_conform_and_audit_pages() -> None:
    trace = random_walk("tiny", 3, max_steps=12)
    summary = {"scenario": "tiny", "variant": "current", "adapter": "impl", "master": "local[2]", "seed": 3,
               "strategy": "random", "traces": 1, "steps": len(trace), "passed": 0, "diverged": 1, "errors": 0,
               "coverage": {"kinds": ["send"], "transitions": [], "error_codes": []},
               "first_divergences": [{"trace_id": trace.id, "step": 2, "detail": "impl answered X",
                                      "shrunk_length": 3}],
               "seconds": {"plan": 0.1, "session": 1.0, "run": 2.0}}
    html = render_page(conform_page(summary, [trace]))
    assert_self_contained(html)
    assert messages(html) == [len(trace)]
    report = AuditReport("noida", ("wire",), 7)
    report.rules.append(RuleResult("wire", "produce.duplicate", "a duplicate is answered with its offset", 2, 1,
                                   [{"sequence": [
                                       {"request": "Produce(seq=0)", "expected": "NONE@0", "actual": "NONE@0"},
                                       {"request": "Produce(seq=0)", "expected": "NONE@0", "actual": "NONE@1"}]}]))
    report.rules.append(RuleResult("wire", "init.bump", "InitProducerId bumps", 1, 0))
    html = render_page(audit_page(report))
    assert_self_contained(html)
    assert messages(html) == [4] and "1 held, 1 violated" in html and "spec expects NONE@0" in html


# --- in a real browser --------------------------------------------------------------------------------

def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (ppid is [1], start time [19]); None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _started(parent: int) -> list[tuple[int, str]]:
    """``parent`` and its children, each with its start time (so a PID reused since is never touched)."""
    found = []
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and (int(entry.name) == parent or int(fields[1]) == parent):
            found.append((int(entry.name), fields[19]))
    return found


def _stop(started: list[tuple[int, str]]) -> None:
    for pid, start in started:
        fields = _stat(pid)
        if fields is not None and fields[19] == start:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("no Chromium here (Debian packages chromium and chromium-driver; bash run.sh test installs them "
                    "when it runs as root with apt)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager look for drivers on the network
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
                 "--disable-extensions", "--no-first-run", "--disable-background-networking"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=driver_path, port=0)
    driver = webdriver.Chrome(service=service, options=options)
    process = service.process
    assert process is not None
    started = _started(process.pid)  # chromedriver and the browser it launched
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(10)
    try:
        yield driver
    finally:
        try:
            driver.quit()
        finally:
            service.stop()
            _stop(started)  # whatever outlived quit(), by PID


def png_pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) bytes of an 8-bit PNG (what Chromium's screenshots are)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,), kind = struct.unpack(">I", png[pos:pos + 4]), png[pos + 4:pos + 8]
        data = png[pos + 8:pos + 8 + length]
        header = data if kind == b"IHDR" else header
        idat += data if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, previous = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def test_the_diff_page_in_chromium(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    html, steps = _diff_html()
    page = tmp_path / "diff.html"
    page.write_text(html)
    browser.get(page.as_uri())
    assert browser.title == "txnspec diff: current vs end-txn-keeps-epoch on delayed-end-txn"
    severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert severe == []
    diagrams = browser.find_elements(By.CSS_SELECTOR, "svg.sequence")
    assert len(diagrams) == 1
    arrows = diagrams[0].find_elements(By.CSS_SELECTOR, "g.message")
    assert len(arrows) == steps
    assert arrows[-1].get_attribute("class") == "message highlight"
    assert diagrams[0].size["width"] > 500 and diagrams[0].size["height"] > 300  # laid out, not collapsed
    shot = tmp_path / "diff.png"
    assert browser.save_screenshot(str(shot))
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == tuple(browser.execute_script("return [window.innerWidth, window.innerHeight]"))
    inked, colours = ink(width, rows)
    assert inked > (width // 4) * (height // 4) // 50, "the screenshot is (nearly) blank"
    assert colours > 10
    # the measure tells a blank page apart
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><head><title>blank</title></head><body></body></html>")
    browser.get(blank.as_uri())
    browser.save_screenshot(str(shot))
    width, _, rows = png_pixels(shot.read_bytes())
    assert ink(width, rows) == (0, 1)


def ink(width: int, rows: list[bytes]) -> tuple[int, int]:
    """Sampled pixels that differ from the top-left one, and distinct colours sampled."""
    bpp = len(rows[0]) // width
    background = rows[0][:3]
    inked = sum(1 for row in rows[::4] for x in range(0, width, 4) if row[x * bpp:x * bpp + 3] != background)
    colours = {row[x * bpp:x * bpp + 3] for row in rows[::8] for x in range(0, width, 8)}
    return inked, len(colours)


def test_audit_of_the_implementation_writes_a_page(tmp_path: Path) -> None:
    out = tmp_path / "audit.html"
    assert main(["audit", "--broker", "impl", "--traces", "1", "--html-out", str(out)]) == 0
    html = out.read_text()
    assert_self_contained(html)
    held = html.count('<td class="ok">held</td>')  # one row per rule (29 now: the wire rules and the timeout)
    assert held >= 29 and f"{held} held, 0 violated" in html and 'class="bad"' not in html


def test_a_liveness_counterexample_says_how_it_ends(tmp_path: Path) -> None:
    out = tmp_path / "live.html"
    assert main(["check", "--scenario", "failover", "--variant", "failover-without-markers", "--property",
                 "prepared_transactions_complete", "--html-out", str(out)]) == 1
    html = out.read_text()
    assert len(messages(html)) == 1 and messages(html)[0] > 0
    assert "After the last step nothing more happens, forever: no weakly fair action is enabled." in html
