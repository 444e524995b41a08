"""A real headless Chromium for the dashboard's tests (the distribution's
``chromium`` and ``chromium-driver``), driven by Selenium.

Selenium is given the chromedriver on PATH, so Selenium Manager never
downloads a browser or a driver. Without them the tests skip locally (saying
how to install them) and fail under CI. Every wait is a deadline
(WebDriverWait) for a hung test, never a timing threshold. Screenshots are
kept as test artefacts under ``test-artifacts/screenshots/`` at the repo root
(or ``$AGENTWRAP_ARTIFACTS_DIR/screenshots``).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
WAIT_S = 60.0  # a deadline for a hung page, not a performance figure
T = TypeVar("T")


def artifacts_dir() -> Path:
    base = os.environ.get("AGENTWRAP_ARTIFACTS_DIR")
    out = (Path(base) if base else ROOT / "test-artifacts") / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    return out


def executables() -> tuple[str, str] | None:
    """(chromium, chromedriver), or None when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def require_browser() -> tuple[str, str]:
    found = executables()
    if found is None:
        why = "chromium or chromedriver not installed: apt-get install -y chromium chromium-driver"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    try:
        import selenium  # noqa: F401
    except ImportError:
        why = "selenium not installed: pip install -e '.[dev]'"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return found


@dataclass
class Browser:
    """One Chromium with its own profile (its own localStorage: not logged in)."""

    driver: Any  # selenium.webdriver.Chrome; Any keeps selenium optional at import time
    name: str  # the test's name, prefixed to its screenshots

    def open(self, url: str) -> None:
        self.driver.get(url)

    def wait(self, cond: Callable[[], T], what: str, timeout: float = WAIT_S) -> T:
        """Until ``cond()`` is truthy (exceptions count as not yet); its value."""
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            result: T = WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(
                lambda _d: cond())
            return result
        except TimeoutException:
            shot = self.shot(f"timeout-{re.sub(r'[^a-z0-9]+', '-', what.lower())[:40]}")
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}"
                                 f" (screenshot {shot}); console: {self.console()[-20:]}") from None

    def css(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def one(self, selector: str) -> Any:
        found = self.css(selector)
        return found[0] if found else None

    def text(self, selector: str) -> str:
        """The textContent of the first match ('' when none): what is on the page,
        hidden parts included."""
        got = self.driver.execute_script(  # one atomic read: no stale element between calls
            "const n = document.querySelector(arguments[0]); return n ? n.textContent : ''",
            selector)
        return str(got or "")

    def click(self, selector: str) -> None:
        """A real click on the first match; again if a redraw replaced it meanwhile."""
        from selenium.common.exceptions import StaleElementReferenceException

        def clicked() -> bool:
            node = self.one(selector)
            if node is None:
                return False
            try:
                node.click()
            except StaleElementReferenceException:
                return False
            return True

        self.wait(clicked, f"a click on {selector}")

    def shown(self, selector: str) -> bool:
        node = self.one(selector)
        return bool(node is not None and node.is_displayed())

    def alert_text(self) -> str | None:
        """The text of an open alert/confirm, or None."""
        from selenium.common.exceptions import NoAlertPresentException

        try:
            return str(self.driver.switch_to.alert.text)
        except NoAlertPresentException:
            return None

    def console(self) -> list[str]:
        """The browser's console messages since the last call."""
        try:
            return [f"{e.get('level')}: {e.get('message')}" for e in self.driver.get_log("browser")]
        except Exception:  # not every driver keeps logs
            return []

    def shot(self, label: str, *, full: bool = True, docs: str = "") -> Path:
        """A PNG of the page: all of it (``full``), or what the window shows
        (toasts sit at its bottom edge). ``docs``: the name of the picture the
        documentation shows, written to ``$AGENTWRAP_SCREENSHOTS/<docs>.png`` too
        when that is set (``AGENTWRAP_SCREENSHOTS=docs/images``), so the README's
        and the site's pictures are the page as the tests see it today."""
        path = artifacts_dir() / f"{self.name}-{label}.png"
        if not full:
            self.driver.save_screenshot(str(path))
        else:
            self._full_shot(path)
        target = os.environ.get("AGENTWRAP_SCREENSHOTS")
        if docs and target:
            Path(target).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(target) / f"{docs}.png")
        return path

    def _full_shot(self, path: Path) -> None:
        self.driver.execute_script("window.scrollTo(0, 0)")  # a sticky header stays on top
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        png = self.driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
        path.write_bytes(base64.b64decode(png["data"]))

    def phone(self, on: bool = True, width: int = 390, height: int = 844) -> None:
        """Lay the page out as a phone's screen does (or back to the window)."""
        if on:
            self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                "width": width, "height": height, "deviceScaleFactor": 1, "mobile": True})
        else:
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    def dark(self, on: bool = True) -> None:
        """Emulate ``prefers-color-scheme: dark`` (or light)."""
        self.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": "dark" if on else "light"}]})


def chromium(name: str, width: int = 1280, height: int = 900,
             flags: tuple[str, ...] = ()) -> Iterator[Browser]:
    """A fresh headless Chromium for one test, quit afterwards; ``flags`` more
    of its command line (the hub's tests: ``--ignore-certificate-errors-spki-list``,
    trusting exactly the test hub's key)."""
    browser_path, driver_path = require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser_path
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},{height}", "--lang=en-US", "--no-first-run",
                 "--disable-extensions", "--disable-background-networking", *flags):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    try:
        yield Browser(driver, re.sub(r"[^A-Za-z0-9_.-]+", "-", name))
    finally:
        driver.quit()
