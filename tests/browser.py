"""Headless Chromium for memspec's pages (Debian's ``chromium`` and ``chromium-driver``, driven
by selenium): what the browser tests open the pages in, and the command that takes the
README's screenshot of a report::

    memspec certify --backend tests.backends.wrappers:batch_item_by_item --report /tmp/bim
    python -m tests.browser /tmp/bim/report.html docs/report.png --open FORMAT-6

The screenshot shows the clause ``--open`` names opened on its evidence, 900 × 520 px, in 64
colours (a small PNG).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Chromium's flags: no window, no sandbox (a container's root), and no connection of its own
(a closed network refuses them, and a page must need none)."""


def missing() -> str | None:
    """Returns what is missing to open a page in Chromium (a program, selenium), or None."""
    for program, package in (("chromium", "chromium"), ("chromedriver", "chromium-driver")):
        if shutil.which(program) is None:
            return f"{program} is not installed (Debian package {package})"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


def chromium(profile: Path, javascript: bool = True, width: int = 1100, height: int = 900) -> Any:
    """Returns a selenium driver of a headless Chromium on the fresh profile ``profile``,
    logging the browser console, with JavaScript off unless ``javascript``; ``HOME`` and the
    XDG directories point into the profile, so the browser writes nothing in the real home
    (its crash reports go to ``$XDG_CONFIG_HOME/chromium`` whatever the profile)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.binary_location = str(shutil.which("chromium"))
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2}
        )
    home = {
        "HOME": str(profile),
        "XDG_CONFIG_HOME": str(profile / ".config"),
        "XDG_CACHE_HOME": str(profile / ".cache"),
    }
    service = Service(str(shutil.which("chromedriver")), env={**os.environ, **home})
    return webdriver.Chrome(service=service, options=options)


def screenshot(page: Path, target: Path, clause: str | None) -> None:
    """Saves a screenshot of ``page`` to ``target``: the top of the page, or the clause
    ``clause`` opened on its evidence; quantised to 64 colours."""
    from PIL import Image

    profile = Path(tempfile.mkdtemp(prefix="memspec-chromium-"))
    driver = chromium(profile)
    try:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 900, "height": 520, "deviceScaleFactor": 1, "mobile": False},
        )
        driver.get(page.resolve().as_uri())
        if clause is not None:
            driver.execute_script(
                "const c=document.getElementById('c-'+arguments[0]);"
                "c.querySelector('details').open=true;c.scrollIntoView();",
                clause,
            )
        driver.save_screenshot(str(target))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    with Image.open(target) as image:
        image.convert("RGB").quantize(colors=64).save(target, optimize=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.browser", description="Take a screenshot of a memspec page."
    )
    parser.add_argument("page", help="report.html or a page of memspec site")
    parser.add_argument("png", help="where the screenshot is written")
    parser.add_argument("--open", metavar="CLAUSE", help="open this clause on its evidence")
    args = parser.parse_args(argv)
    problem = missing()
    if problem is not None:
        print(f"python -m tests.browser: error: {problem}", file=sys.stderr)
        return 2
    if not Path(args.page).is_file():
        print(f"python -m tests.browser: error: no such page: {args.page}", file=sys.stderr)
        return 2
    screenshot(Path(args.page), Path(args.png), args.open)
    print(f"screenshot: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
