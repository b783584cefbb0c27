"""The browsable page in a real browser: headless Chromium opens the list the service
serves on loopback (on an imported database), follows a page link, filters, signs in by
pasting a key, posts, replies, deletes, marks read, signs out, checks that every image
of every page loads, and leaves screenshots.

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

from commentsvc.storage import engine
from conftest import make_app, read_ndjson, sample_path
from helpers import newest_first

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PAGE_SIZE = 4
TESTER_ID, TESTER = 17, "bob"  # a user of the sample, with an avatar; made staff below


@pytest.fixture
def service(tmp_path):
    """The service on a free loopback port, its database filled by the import command,
    and a key for the tester (who is staff, so may mark a comic page's comments read)."""
    app = make_app(f"sqlite:///{tmp_path / 'browser.sqlite3'}",
                   COMMENTSVC_PAGE_SIZE=PAGE_SIZE)
    cli = app.test_cli_runner()
    imported = cli.invoke(args=["import", str(sample_path())])
    assert imported.exit_code == 0, imported.output
    assert cli.invoke(args=["staff", str(TESTER_ID)]).exit_code == 0
    made = cli.invoke(args=["create-token", str(TESTER_ID)])
    assert made.exit_code == 0, made.output
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield SimpleNamespace(url=f"http://127.0.0.1:{server.server_port}",
                          key=made.output.strip())
    server.shutdown()
    thread.join()
    server.server_close()
    with app.app_context():
        engine.get_engine().dispose()


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


def test_a_person_signs_in_and_uses_the_page_in_a_browser(service, browser, tmp_path):
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as until
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.wait import WebDriverWait

    records = read_ndjson(sample_path())
    wait = WebDriverWait(browser, 20)
    checked_images: set[str] = set()

    def shown_ids() -> list[int]:
        return [int(card.get_attribute("id").removeprefix("comment-")) for card in
                browser.find_elements(By.CSS_SELECTOR, ".preview > article.comment")]

    def every_image_loads() -> None:
        """Each image of the page has arrived and decoded (a broken one has width 0)."""
        wait.until(lambda b: b.execute_script(
            "return Array.from(document.images).every(i => i.complete)"))
        images = browser.execute_script(
            "return Array.from(document.images).map(i => [i.currentSrc, i.naturalWidth])")
        assert images, "a page of comments shows avatars"
        assert [src for src, width in images if not width > 0] == []
        checked_images.update(src for src, _ in images)

    def card(comment_id: int):
        return browser.find_element(By.ID, f"comment-{comment_id}")

    def click_and_wait_for_reload(button) -> None:
        button.click()
        wait.until(detached(button))

    def detached(button):
        """until.staleness_of, also when ChromeDriver reports the node gone from the
        document as an inspector error rather than as a stale element (it does, now and
        then, while the old page is being replaced)."""
        stale = until.staleness_of(button)

        def check(driver) -> bool:
            try:
                return bool(stale(driver))
            except WebDriverException as exc:
                if "does not belong to the document" in str(exc):
                    return True
                raise

        return check

    # A browser's own Accept header gets the page, with its stylesheet applied.
    browser.get(service.url + "/api/comments/")
    assert browser.title.startswith("Comment List")
    assert browser.find_element(By.CSS_SELECTOR, ".panes").value_of_css_property(
        "display") == "grid"
    assert shown_ids() == newest_first(records)[:PAGE_SIZE]
    assert browser.find_element(By.CSS_SELECTOR, ".who").text.startswith("Not signed in")
    every_image_loads()

    # Follow the pager to page 2.
    pager = browser.find_element(By.CSS_SELECTOR, ".paging .pager")
    pager.find_element(By.LINK_TEXT, "2").click()
    wait.until(until.url_contains("page=2"))
    current = browser.find_element(By.CSS_SELECTOR, ".paging .pager .current")
    assert current.text == "2" and current.get_attribute("aria-current") == "page"
    assert shown_ids() == newest_first(records)[PAGE_SIZE:2 * PAGE_SIZE]
    every_image_loads()

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
    assert browser.find_elements(By.ID, "post") == []  # no form before signing in
    every_image_loads()
    browser.save_screenshot(str(tmp_path / "comments.png"))

    # Sign in by pasting the key; the browser comes back to the filtered page.
    filtered = browser.current_url
    browser.find_element(By.CSS_SELECTOR, ".who a.sign-in").click()
    wait.until(until.title_contains("Sign in"))
    browser.find_element(By.ID, "field-key").send_keys(service.key)
    browser.find_element(By.CSS_SELECTOR, "main form button[type=submit]").click()
    wait.until(until.url_to_be(filtered))
    assert browser.find_element(By.CSS_SELECTOR, ".who strong").text == TESTER

    # Post a comment with the form, prefilled with the filter's target.
    body = browser.find_element(By.ID, "field-body")
    body.send_keys("Posted from Chromium <b>not bold</b>")
    browser.find_element(By.CSS_SELECTOR, "#post button[type=submit]").click()
    wait.until(until.title_contains("Comment posted"))
    assert browser.find_element(By.CSS_SELECTOR, ".status-line").text == "HTTP 201 Created"
    assert browser.find_element(By.CSS_SELECTOR, ".preview .body").text == (
        "Posted from Chromium <b>not bold</b>")
    every_image_loads()
    browser.save_screenshot(str(tmp_path / "posted.png"))

    # The list now starts with it, by the tester; reply to it.
    browser.get(filtered)
    posted = shown_ids()[0]
    assert card(posted).find_element(By.CSS_SELECTOR, ".author").text == TESTER
    card(posted).find_element(By.CSS_SELECTOR, "details.reply summary").click()
    card(posted).find_element(By.CSS_SELECTOR, "details.reply textarea").send_keys(
        "A reply from Chromium")
    card(posted).find_element(By.CSS_SELECTOR, "details.reply button[type=submit]").click()
    wait.until(until.title_contains("Comment posted"))
    assert browser.find_element(By.CSS_SELECTOR, ".preview .body").text == (
        "A reply from Chromium")

    # The reply sits under its root; delete it.
    browser.get(filtered)
    replies = card(posted).find_elements(By.CSS_SELECTOR, ".replies > article.comment")
    assert [r.find_element(By.CSS_SELECTOR, ".body").text for r in replies] == [
        "A reply from Chromium"]
    reply_id = int(replies[0].get_attribute("id").removeprefix("comment-"))
    click_and_wait_for_reload(card(reply_id).find_element(By.CSS_SELECTOR, "button.delete"))
    assert card(reply_id).find_element(By.CSS_SELECTOR, ".gone").text == (
        "This comment was deleted.")
    assert card(reply_id).find_elements(By.CSS_SELECTOR, "button.delete") == []

    # Mark an unread comment read (the tester is staff), then unread again.
    unread = next(i for i in shown_ids()
                  if card(i).find_elements(By.CSS_SELECTOR, ":scope > .content > .actions"
                                                            " > button.mark"))
    mark = card(unread).find_element(By.CSS_SELECTOR, ":scope > .content > .actions > .mark")
    assert mark.text == "Mark read"
    click_and_wait_for_reload(mark)
    mark = card(unread).find_element(By.CSS_SELECTOR, ":scope > .content > .actions > .mark")
    assert mark.text == "Mark unread"
    badges = card(unread).find_elements(By.CSS_SELECTOR, ":scope > .content > .meta .badge")
    assert "unread" not in [badge.text for badge in badges]
    every_image_loads()
    browser.save_screenshot(str(tmp_path / "signed-in.png"))

    # Sign out: the header says so and the forms are gone.
    browser.find_element(By.CSS_SELECTOR, ".who form.sign-out button").click()
    wait.until(until.text_to_be_present_in_element((By.CSS_SELECTOR, ".who"),
                                                   "Not signed in"))
    assert browser.find_elements(By.ID, "post") == []
    every_image_loads()

    # Avatars of both kinds were shown, and the page's own script ran within its policy.
    assert any("/media/users/" in src for src in checked_images)
    assert any(src.endswith("/static/img/default-avatar.png") for src in checked_images)
    # (The browser's own /favicon.ico request is not the page's: the service has none.)
    problems = [entry["message"] for entry in browser.get_log("browser")
                if (entry["level"] == "SEVERE" and "/favicon.ico" not in entry["message"])
                or "Content Security Policy" in entry["message"]]
    assert problems == []
    for name in ("comments.png", "posted.png", "signed-in.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
