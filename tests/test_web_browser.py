"""The console in real headless Chromium: search, live sync progress and cancel, files, health.

Needs Debian's `chromium` and `chromium-driver` and selenium from PyPI; selenium-manager is
kept offline (SE_OFFLINE, explicit binary and driver paths). Screenshots of every view go to
test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import require_tool
from progress_fixtures import TEXT, semantic_phase_job
from web_fixtures import (
    PDF_PAGE2_WORDS,
    REPO,
    ConsoleProcess,
    make_config,
    start_console_process,
    sync_now,
    write_bulk,
    write_small_corpus,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = REPO / "test-artifacts"
BULK_FILES = 5000  # a sync of several seconds (1,500 took ~3 s after issue 16: a cancel, read
# once a second, came after the last file), so progress is seen moving and a cancel lands
LISTED_FILES = 120  # more than two pages of 50 in the Files view
WAIT_S = 30.0  # upper bound for any one thing to appear; never an expected duration
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)

require_tool(
    CHROMIUM.exists() and CHROMEDRIVER.exists(),
    "headless Chromium",
    "apt-get install -y chromium chromium-driver",
)
os.environ["SE_OFFLINE"] = "true"  # selenium-manager must never try to download a browser
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.expected_conditions import staleness_of  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@dataclass(frozen=True)
class Site:
    url: str
    knowledge: Path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("browser")
    write_small_corpus(root)
    kb = root / "kb"
    for i in range(LISTED_FILES):
        (kb / "many").mkdir(exist_ok=True)
        (kb / "many" / f"memo-{i:03d}.md").write_text(f"# Memo {i}\n\nShort memo number {i}.\n")
    config = make_config(kb, root / "state")
    sync_now(config)
    write_bulk(kb / "bulk", BULK_FILES)  # new since the last sync: the browser's sync reads them
    process: ConsoleProcess = start_console_process(
        ["--knowledge-dir", str(kb), "--data-dir", str(config.data_dir), "--port", "0"],
        env={"RAGDOC_SEMANTIC": "off"},
    )
    try:
        yield Site(process.url, kb)
    finally:
        process.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(
        lambda d: condition(d), message=f"timed out waiting for {what}"
    )


def no_console_errors(driver: WebDriver) -> None:
    """CSP violations and script errors show up as SEVERE browser log entries."""
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def screenshot(driver: WebDriver, name: str) -> None:
    path = ARTIFACTS / f"console-{name}.png"
    assert driver.save_screenshot(str(path)), path


def open_view(driver: WebDriver, site: Site, view: str) -> None:
    driver.get(f"{site.url}#{view}")
    wait_for(driver, lambda d: d.find_element(By.ID, f"view-{view}").is_displayed(), view)


def search(driver: WebDriver, site: Site, query: str) -> list[Any]:
    open_view(driver, site, "search")
    previous = driver.find_elements(By.CSS_SELECTOR, "#results .hit")
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(query)
    driver.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]").click()
    if previous:  # the same page from an earlier test: wait for this query's answer
        wait_for(driver, staleness_of(previous[0]), "the previous results to go")
    return wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .hit"), "hits")


def progress(driver: WebDriver) -> float:
    return float(driver.find_element(By.ID, "job-progress").get_property("value"))


def test_a_search_shows_hits_with_location_marks_section_and_neighbours(
    browser: WebDriver, site: Site
) -> None:
    hits = search(browser, site, "invoice payment")
    first = hits[0]
    assert first.find_element(By.CSS_SELECTOR, ".path").text == "contracts/service-agreement.md"
    assert "Invoice payment terms" in first.find_element(By.CSS_SELECTOR, ".location").text
    marks = [m.text.lower() for m in first.find_elements(By.CSS_SELECTOR, ".snippet mark")]
    assert "invoice" in marks and "**" not in first.find_element(By.CSS_SELECTOR, ".snippet").text
    assert re.search(r"\w+ #1", first.find_element(By.CSS_SELECTOR, ".channels").text)
    abs_path = first.find_element(By.CSS_SELECTOR, ".abs-path").text
    assert abs_path == str(site.knowledge / "contracts" / "service-agreement.md")
    browser.execute_cdp_cmd(
        "Browser.grantPermissions",
        {
            "origin": site.url.rstrip("/"),
            "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"],
        },
    )
    first.find_element(By.CSS_SELECTOR, "button.copy").click()
    wait_for(
        browser,
        lambda d: first.find_element(By.CSS_SELECTOR, "button.copy").text == "Copied",
        "copy",
    )
    pasted = browser.execute_async_script(
        "navigator.clipboard.readText().then(arguments[0], (e) => arguments[0]('error ' + e))"
    )
    assert pasted == abs_path
    first.find_element(By.CSS_SELECTOR, "button.show-section").click()
    section = first.find_element(By.CSS_SELECTOR, ".section-text")
    assert "payable within 30 days" in section.text
    first.find_element(By.XPATH, ".//button[text()='Show neighbouring sections']").click()
    wait_for(browser, lambda d: len(first.find_elements(By.CSS_SELECTOR, ".neighbour")) == 3, "3")
    assert "Termination" in first.text
    screenshot(browser, "search")
    no_console_errors(browser)


def test_document_markup_in_results_is_shown_as_text_never_run(
    browser: WebDriver, site: Site
) -> None:
    hits = search(browser, site, "zebra payload")
    assert "<img src=x onerror=" in hits[0].find_element(By.CSS_SELECTOR, ".snippet").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#results img, #results script, #results b")
    hits[0].find_element(By.CSS_SELECTOR, "button.show-section").click()
    assert "<script>" in hits[0].find_element(By.CSS_SELECTOR, ".section-text").text
    assert browser.title == "RagDoc console"
    no_console_errors(browser)


def test_a_pdf_hit_opens_the_original_at_its_page(browser: WebDriver, site: Site) -> None:
    hits = search(browser, site, PDF_PAGE2_WORDS)
    link = hits[0].find_element(By.CSS_SELECTOR, "a.open")
    assert link.get_attribute("href").endswith("/api/file?path=manuals%2Fwrench.pdf#page=2")
    assert link.get_attribute("rel") == "noopener noreferrer"


def test_sync_progress_moves_survives_a_reload_and_cancels(browser: WebDriver, site: Site) -> None:
    open_view(browser, site, "sync")
    browser.find_element(By.ID, "sync-start").click()
    running = wait_for(
        browser,
        lambda d: d.find_element(By.ID, "job-state").text == "running" and progress(d) > 0,
        "the sync to report progress",
    )
    assert running
    first = progress(browser)
    assert "files" in browser.find_element(By.ID, "job-files").text
    assert browser.find_element(By.ID, "job-current").text.startswith("Now: ")
    screenshot(browser, "sync-running")
    browser.refresh()  # the page reads the job row again and follows the same job
    wait_for(browser, lambda d: progress(d) > first, "the progress bar to move after a reload")
    assert browser.find_element(By.ID, "job-state").text == "running"
    assert f"{progress(browser):.1f} %" == browser.find_element(By.ID, "job-percent").text
    browser.find_element(By.ID, "sync-cancel").click()
    wait_for(browser, lambda d: d.find_element(By.ID, "job-state").text == "cancelled", "cancel")
    wait_for(
        browser,
        lambda d: "cancelled" in d.find_element(By.CSS_SELECTOR, "#jobs tr").text,
        "the history to show the cancelled job",
    )
    assert browser.find_element(By.ID, "sync-cancel").get_property("disabled")
    # Files not indexed, by reason with examples (skips are not per-file errors)
    browser.find_element(By.CSS_SELECTOR, "#job-skipped-box summary").click()
    skipped = browser.find_element(By.ID, "job-skipped").text
    assert "sensitive: 1" in skipped and "notes/credentials.txt" in skipped
    assert "hidden:" in skipped and ".env" in skipped
    screenshot(browser, "sync-cancelled")
    no_console_errors(browser)


def files_range(driver: WebDriver) -> str:
    return driver.find_element(By.ID, "files-range").text


def first_file(driver: WebDriver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "#files tr td a").text


def test_the_files_view_pages_sorts_and_filters_on_the_server(
    browser: WebDriver, site: Site
) -> None:
    open_view(browser, site, "files")
    wait_for(browser, lambda d: files_range(d).startswith("1–50 of "), "the first page")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#files tr")) == 50
    top = first_file(browser)
    browser.find_element(By.ID, "files-next").click()
    wait_for(browser, lambda d: files_range(d).startswith("51–100 of "), "the second page")
    assert first_file(browser) != top
    screenshot(browser, "files")
    browser.find_element(By.CSS_SELECTOR, "button[data-sort=size]").click()
    wait_for(browser, lambda d: files_range(d).startswith("1–50 "), "sorting to restart paging")
    header = browser.find_element(By.CSS_SELECTOR, "button[data-sort=size]").find_element(
        By.XPATH, ".."
    )
    assert header.get_attribute("aria-sort") == "descending"
    browser.find_element(By.ID, "files-contains").send_keys("many/memo-11")
    wait_for(browser, lambda d: files_range(d) == "1–10 of 10", "the filter")
    assert browser.find_element(By.ID, "files-last").get_property("disabled")
    no_console_errors(browser)


def test_the_files_view_lists_skipped_files_with_their_reason(
    browser: WebDriver, site: Site
) -> None:
    from selenium.webdriver.support.ui import Select

    open_view(browser, site, "files")
    browser.find_element(By.ID, "files-contains").clear()  # the view keeps earlier filters
    Select(browser.find_element(By.ID, "files-status")).select_by_value("skipped")
    wait_for(
        browser,
        lambda d: "notes/credentials.txt" in d.find_element(By.ID, "files").text,
        "the skipped files",
    )
    rows = {
        row.find_element(By.CSS_SELECTOR, "td.path-cell span").text: row.text
        for row in browser.find_elements(By.CSS_SELECTOR, "#files tr")
    }
    assert "sensitive" in rows["notes/credentials.txt"]  # the reason badge
    assert "hidden" in rows[".env"]
    assert browser.find_elements(By.CSS_SELECTOR, "#files tr td a") == []  # never linked
    no_console_errors(browser)


def test_the_health_view_shows_counts_paths_and_engine_states(
    browser: WebDriver, site: Site
) -> None:
    open_view(browser, site, "health")
    cards = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#health .card"), "cards")
    text = "\n".join(card.text for card in cards)
    for expected in (
        "Index",
        "Documents",
        "Chunk scheme",
        "Semantic search",
        "OCR",
        "Free space (data folder)",
        "Read-only",
        str(site.knowledge),
    ):
        assert expected in text, expected
    assert re.search(r"Free space \(data folder\)\s+[\d.,]+\s*[KMGT]?i?B", text), text
    assert "start with --semantic on" in text  # the state comes with its fix
    screenshot(browser, "health")
    no_console_errors(browser)


def test_the_semantic_phase_shows_texts_embedded_and_its_own_eta(
    browser: WebDriver, tmp_path: Path
) -> None:
    """The same words as the terminal bar and sync_status (tests/test_semantic_progress.py)."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "memo.md").write_text("# Memo\n\nThe invoice is due.\n", encoding="utf-8")
    config = make_config(kb, tmp_path / "state")
    sync_now(config)
    with semantic_phase_job(config):
        process = start_console_process(
            ["--knowledge-dir", str(kb), "--data-dir", str(config.data_dir), "--port", "0"],
            env={"RAGDOC_SEMANTIC": "off"},
        )
        try:
            open_view(browser, Site(process.url, kb), "sync")
            wait_for(browser, lambda d: d.find_element(By.ID, "job-files").text == TEXT, TEXT)
            assert browser.find_element(By.ID, "job-phase").text == "phase: semantic"
            eta = browser.find_element(By.ID, "job-eta").text
            assert eta.startswith("about ") and eta.endswith(" left"), eta
            screenshot(browser, "sync-semantic-phase")
            no_console_errors(browser)
        finally:
            process.stop()
