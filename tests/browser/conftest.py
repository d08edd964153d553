"""Headless Chromium for the browser tests.

The browser comes from the Debian packages ``chromium`` and
``chromium-driver`` (CI installs them in ``.ci/run`` when missing; see the
README); selenium from the ``test`` extra.  Without them the tests skip and
say why.  Screenshots go to ``test-artifacts/`` (gitignored).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("FABRIC_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FABRIC_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# Flags that work on a closed network: without the background-networking ones
# Chromium keeps trying to reach Google services and its connections are refused.
# SwiftShader (software WebGL) is opted into explicitly: headless machines have no GPU.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--enable-unsafe-swiftshader", "--window-size=1600,1000")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def _chromium(*extra: str):
    """Start headless Chromium with ``FLAGS + extra``; yields the driver, cleans up."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.path.exists(path):
            pytest.skip(f"{path} not found: install the Debian package {package} "
                        f"(apt-get install -y chromium chromium-driver; .ci/run does it on CI)")
    profile = tempfile.mkdtemp(prefix="fabric-chromium-")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in FLAGS + extra:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(300)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium with WebGL (software, SwiftShader), console logs enabled."""
    yield from _chromium()


@pytest.fixture(scope="session")
def browser_canvas():
    """Headless Chromium without WebGL, like a browser without a GPU: BokehJS falls back to canvas."""
    yield from _chromium("--disable-webgl", "--disable-3d-apis")
