"""Headless Chromium from Debian's packages, driven by selenium through chromedriver, with
the flags this machine needs (no sandbox as root, no GPU, no network calls of its own)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.servers import wait_for

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000")


def find_browser() -> tuple[str, str]:
    """(chromium, chromedriver) paths; skips the test with the reason when either is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("Chromium is not installed: `make test` installs Debian's chromium and chromium-driver "
                    "(as root, with apt-get); install them to run the browser tests")
    return chromium, driver


def start_browser(profile: Path) -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    chromium, driver = find_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    return webdriver.Chrome(options=options, service=Service(driver))


def eventually(check: Callable[[], Any], timeout: float = 20.0, message: str = "condition") -> Any:
    """``check()`` until it returns something truthy; DOM nodes replaced by a refresh
    (stale references) and missing ones count as "not yet"."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    def attempt() -> Any:
        try:
            return check()
        except (StaleElementReferenceException, NoSuchElementException, ValueError) as e:
            raise AssertionError(repr(e)) from None
    return wait_for(attempt, timeout, interval=0.1, message=message)
