"""Headless Chromium for the browser tests: the browser, the servers it visits, screenshots.

Debian's ``chromium`` driven by its ``chromedriver`` through selenium, both
found on PATH (``make setup`` installs them as root: ``apt-get install
chromium chromium-driver``); selenium's own driver manager is never asked, so
nothing is downloaded. Jupyter servers run in a process group of their own on
a free port of 127.0.0.1 with a known token, their output in a log file, and
are stopped with their whole process group and every process they started
(kernels run in sessions of their own).

Screenshots go to ``$WEEK6_ARTIFACTS`` (default ``build/test-artifacts/browser/``,
ignored by git); :func:`screenshot` can also copy one into ``docs/screenshots/``
(where missing, or always with ``WEEK6_UPDATE_SCREENSHOTS=1``).
"""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autograder.paths import REPO

DOCS_SCREENSHOTS = REPO / "docs" / "screenshots"
WINDOW = (1280, 900)  # the size of the screenshots in docs/
INSTALL_HINT = "apt-get install chromium chromium-driver (make setup does it as root)"


def browser_paths() -> tuple[str | None, str | None]:
    """(chromium, chromedriver) executables, or None where missing."""
    browser = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(name)), None)
    return browser, shutil.which("chromedriver")


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    browser, driver = browser_paths()
    missing = [name for name, path in (("chromium", browser), ("chromedriver", driver)) if path is None]
    if missing:
        return f"{' and '.join(missing)} not found on PATH: {INSTALL_HINT}"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed in this environment (pip install -r requirements.lock, or make setup)"
    return None


def artifacts() -> Path:
    folder = Path(os.environ.get("WEEK6_ARTIFACTS") or REPO / "build" / "test-artifacts" / "browser")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def chrome(window: tuple[int, int] = WINDOW) -> Iterator[Any]:
    """A headless Chromium (selenium ``WebDriver``), quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={window[0]},{window[1]}", "--hide-scrollbars", "--force-device-scale-factor=1",
                     "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--lang=en-US"):
        options.add_argument(argument)
    # SE_AVOID_STATS: selenium's driver manager would otherwise report usage (it is not run: the
    # driver's path is given), harmless offline but not wanted from a test.
    os.environ.setdefault("SE_AVOID_STATS", "true")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        # --window-size counts the window's frame: make the page itself (and screenshots) `window`.
        driver.set_window_size(*window)
        inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
        driver.set_window_size(2 * window[0] - inner[0], 2 * window[1] - inner[1])
        yield driver
    finally:
        driver.quit()


# The browser test modules import these two fixtures: autouse, ``browser_ready`` skips
# the importing module before any of its own fixtures builds a course or a bundle.
@pytest.fixture(scope="module", autouse=True)
def browser_ready():
    """Skip before building anything when there is no browser to drive."""
    why = missing_browser()
    if why:
        pytest.skip(why)


@pytest.fixture
def driver(browser_ready):
    """A headless Chromium for one test."""
    with chrome() as browser:
        yield browser


def wait(driver: Any, seconds: float, poll: float = 0.25):
    """``WebDriverWait`` that also ignores elements going stale while a page re-renders."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds, poll_frequency=poll,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))


def until(condition: Callable[[], Any], seconds: float, message: str, poll: float = 0.25) -> Any:
    """Wait for ``condition()`` to be truthy (with no browser involved: files, databases, servers)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(object(), seconds, poll_frequency=poll).until(lambda _: condition(), message)


def network_quiet(driver: Any, quiet: float = 2.0, seconds: float = 60) -> None:
    """Wait until the page has made no new request for ``quiet`` seconds.

    What a page's scripts do with the network (a chain of API calls) ends before
    its effects can be checked; a request counts once it completes.
    """
    import time

    count = "return performance.getEntriesByType('resource').length;"
    last = [driver.execute_script(count), time.monotonic()]

    def settled() -> bool:
        now = driver.execute_script(count)
        if now != last[0]:
            last[:] = [now, time.monotonic()]
        return time.monotonic() - last[1] >= quiet

    until(settled, seconds, f"the page kept making requests for {seconds} s", poll=0.25)


def screenshot(driver: Any, name: str, docs: str | None = None) -> Path:
    """Save the window as ``<artifacts>/<name>.png``.

    With ``docs``, also as ``docs/screenshots/<docs>`` (128 colours, about 65 kB)
    when that file is missing or ``WEEK6_UPDATE_SCREENSHOTS=1``: the pictures
    change with every run (times, order of submissions), and a test run should
    not leave the working tree modified.
    """
    path = artifacts() / f"{name}.png"
    driver.save_screenshot(str(path))
    if docs:
        target = DOCS_SCREENSHOTS / docs
        if os.environ.get("WEEK6_UPDATE_SCREENSHOTS") == "1" or not target.exists():
            DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            small_copy(path, target)
    return path


def small_copy(source: Path, target: Path) -> None:
    """``source`` as a PNG of 128 colours (screenshots of text lose nothing visible), else as it is."""
    try:
        from PIL import Image
    except ImportError:
        shutil.copyfile(source, target)
        return
    with Image.open(source) as image:
        image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT,
                                      dither=Image.Dither.NONE).save(target, optimize=True)


@contextlib.contextmanager
def evidence(driver: Any, name: str) -> Iterator[None]:
    """On a failure inside the block, keep a screenshot and the page's HTML as artefacts."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            driver.save_screenshot(str(artifacts() / f"{name}-FAILED.png"))
            (artifacts() / f"{name}-FAILED.html").write_text(driver.page_source)
        raise


def scroll_into_view(driver: Any, element: Any, block: str = "center") -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: arguments[1]});", element, block)


def text_of(element: Any) -> str:
    """The element's ``textContent``: also for cells JupyterLab keeps out of the viewport."""
    return element.get_attribute("textContent") or ""


def http_get(url: str, timeout: float = 30) -> tuple[int, str]:
    """(status, body) of a GET; status 0 while nothing listens yet."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, ""
    except (urllib.error.URLError, OSError):
        return 0, ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JupyterServer:
    """A Jupyter server (``jupyter lab`` or ``jupyter server``) started for one test.

    ``command`` gets ``--no-browser``, the port, the address and the token
    appended; the server runs in its own session (process group) so that
    :meth:`stop` ends it and every kernel it started.
    """

    def __init__(self, command: list[str], *, cwd: Path, env: dict[str, str], log: Path):
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.command = [*command, "--no-browser", f"--port={self.port}", "--port-retries=0",
                        "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={self.token}"]
        with open(log, "wb") as out:
            self.process = subprocess.Popen(self.command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def page(self, path: str) -> str:
        """The URL of ``path`` on this server, with the token."""
        separator = "&" if "?" in path else "?"
        return f"{self.url}/{path.lstrip('/')}{separator}token={self.token}"

    def descendants(self) -> list:
        """psutil processes the server started (kernels included: they are its children)."""
        import psutil

        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.Error:
            return []

    def get(self, path: str) -> tuple[int, str]:
        """(status, body) of a GET of ``path`` (with the token)."""
        return http_get(self.page(path))

    def status_of(self, path: str) -> int:
        """The HTTP status of a GET of ``path`` (with the token)."""
        return self.get(path)[0]

    def log_in(self, driver: Any, path: str) -> None:
        """Open ``path`` through the server's login page, typing the token as a person would.

        (A token in the URL of a formgrader page is not enough: nbgrader's handlers
        give the login cookie an empty path, so the browser keeps it for that one
        page and the page's own API requests are sent to the login page.)
        """
        from urllib.parse import quote

        from selenium.webdriver.common.by import By

        driver.get(f"{self.url}/login?next={quote('/' + path.lstrip('/'))}")
        field = wait(driver, 30).until(lambda d: d.find_element(By.ID, "password_input"))
        field.send_keys(self.token)
        driver.find_element(By.ID, "login_submit").click()
        wait(driver, 30).until(lambda d: "/login" not in d.current_url, "the login page did not accept the token")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"the server exited with status {self.process.returncode}:\n{self.log_tail()}")
        return http_get(self.page("api/status"), timeout=5)[0] == 200

    def wait_until_ready(self, seconds: float = 120) -> JupyterServer:
        try:
            until(self._answers, seconds, f"the server did not answer on {self.url} within {seconds} s")
        except Exception as err:
            raise AssertionError(f"{err}\n{' '.join(self.command)}\n{self.log_tail()}") from err
        return self

    def stop(self) -> None:
        """End the server and everything it started.

        SIGTERM to the server's process group (the server shuts its kernels
        down), SIGKILL to the group after 10 s; kernels run in sessions of their
        own, so any of the server's descendants still alive then is killed by
        its id (and, when it leads a process group, with its group).
        """
        import psutil

        descendants = self.descendants()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        _, alive = psutil.wait_procs(descendants, timeout=5)
        for child in alive:
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                if child.is_running() and os.getpgid(child.pid) == child.pid:
                    os.killpg(child.pid, signal.SIGKILL)
                child.kill()
        psutil.wait_procs(alive, timeout=5)
