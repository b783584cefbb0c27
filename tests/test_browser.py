"""The browsable page in a real browser: headless Chromium opens the list the service
serves on loopback (on an imported database), follows a page link, filters, posts a
comment, and leaves a screenshot.

It needs Debian's chromium and chromium-driver; Selenium is pointed at both, so Selenium
Manager never downloads a browser or a driver. Without them the test skips, except in CI
(CI=true, set by .ci/run, which installs them), where it fails.
"""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace

import pytest
from werkzeug.serving import make_server

from commentsvc import db
from conftest import make_app, read_ndjson, sample_path
from helpers import newest_first

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PAGE_SIZE = 4
TESTER = SimpleNamespace(id=5001, username="Browser Tester", avatar=None, is_staff=False)


def signed_in_tester():
    """The host's signed-in user, as a site's session login would hand it over."""
    return TESTER


@pytest.fixture
def service(tmp_path):
    """The service on a free loopback port, its database filled by the import command."""
    app = make_app(f"sqlite:///{tmp_path / 'browser.sqlite3'}",
                   COMMENTSVC_PAGE_SIZE=PAGE_SIZE, COMMENTSVC_CURRENT_USER=signed_in_tester)
    imported = app.test_cli_runner().invoke(args=["import", str(sample_path())])
    assert imported.exit_code == 0, imported.output
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()
    server.server_close()
    with app.app_context():
        db.get_engine().dispose()


@pytest.fixture
def browser(tmp_path, monkeypatch):
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs {' and '.join(missing)} (apt-get install chromium "
                        "chromium-driver)")
        pytest.skip(f"no {' and '.join(missing)}")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager, if ever asked: no downloads
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless", "--no-sandbox", "--disable-gpu",
                     "--disable-background-networking", "--window-size=1280,1000",
                     f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def test_a_person_pages_filters_and_posts_in_a_browser(service, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as until
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.wait import WebDriverWait

    records = read_ndjson(sample_path())
    wait = WebDriverWait(browser, 20)

    def shown_ids() -> list[int]:
        return [int(card.get_attribute("id").removeprefix("comment-")) for card in
                browser.find_elements(By.CSS_SELECTOR, ".preview > article.comment")]

    # A browser's own Accept header gets the page, with its stylesheet applied.
    browser.get(service + "/api/comments/")
    assert browser.title.startswith("Comment List")
    assert browser.find_element(By.CSS_SELECTOR, ".panes").value_of_css_property(
        "display") == "grid"
    assert shown_ids() == newest_first(records)[:PAGE_SIZE]

    # Follow the pager to page 2.
    pager = browser.find_element(By.CSS_SELECTOR, ".paging .pager")
    pager.find_element(By.LINK_TEXT, "2").click()
    wait.until(until.url_contains("page=2"))
    current = browser.find_element(By.CSS_SELECTOR, ".paging .pager .current")
    assert current.text == "2" and current.get_attribute("aria-current") == "page"
    assert shown_ids() == newest_first(records)[PAGE_SIZE:2 * PAGE_SIZE]

    # Filter to one comic page.
    Select(browser.find_element(By.ID, "filter-content_type")).select_by_value(
        "comics.comicpage")
    object_id = browser.find_element(By.ID, "filter-object_id")
    object_id.clear()
    object_id.send_keys("100")
    browser.find_element(By.CSS_SELECTOR, ".filters button[type=submit]").click()
    wait.until(until.url_contains("object_id=100"))
    assert "format=api" in browser.current_url
    target = newest_first(records, "comics.comicpage", 100)
    assert shown_ids() == target[:PAGE_SIZE]
    count = browser.find_element(By.CSS_SELECTOR, ".page-count").text
    assert count == f"Page 1 of {-(-len(target) // PAGE_SIZE)}"
    browser.save_screenshot(str(tmp_path / "comments.png"))

    # Post a comment with the form, prefilled with the filter's target.
    body = browser.find_element(By.ID, "field-body")
    body.send_keys("Posted from Chromium <b>not bold</b>")
    browser.find_element(By.CSS_SELECTOR, "#post button[type=submit]").click()
    wait.until(until.title_contains("Comment posted"))
    assert browser.find_element(By.CSS_SELECTOR, ".status-line").text == "HTTP 201 Created"
    assert browser.find_element(By.CSS_SELECTOR, ".preview .body").text == (
        "Posted from Chromium <b>not bold</b>")
    browser.save_screenshot(str(tmp_path / "posted.png"))

    # The list now starts with it.
    browser.find_element(By.CSS_SELECTOR, ".back a").click()
    wait.until(until.title_contains("Comment List"))
    browser.get(service + "/api/comments/?content_type=comics.comicpage&object_id=100")
    first = browser.find_element(By.CSS_SELECTOR, ".preview > article.comment")
    assert first.find_element(By.CSS_SELECTOR, ".author").text == "Browser Tester"

    blocked = [entry["message"] for entry in browser.get_log("browser")
               if "Content Security Policy" in entry["message"]]
    assert blocked == []
    for name in ("comments.png", "posted.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
