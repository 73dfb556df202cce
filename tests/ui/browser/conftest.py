"""The web UI in real headless Chromium (Debian's `chromium`, driven by Playwright's Python API),
against a real `goldenset serve` on loopback, on every backend.

Each module seeds its database once per backend (the module's `seed(engine) -> dict[str, str]`
returns tokens by role; `seed_pool` below is the default), then one server runs for the module.
Each test gets a fresh browser context; any request that leaves loopback fails the test (every
asset must be served by goldenset), and so does an error in the page's console. Screenshots of
every page a test visits go to `var/test-output/screenshots/<test>/`: look at them.

The browser is never skipped: without `chromium` on the PATH (`apt-get install chromium`, which
`make test` does when it can), these tests fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, Playwright, sync_playwright
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.evals import EvalCreate
from schemas.item import Item, ItemStatus
from service.core.db import make_engine, write_session
from service.core.tokens import create_token
from service.evals.definitions import create_eval
from service.evals.refresh import refresh_eval
from tests.conftest import BACKENDS, REPO_ROOT, TEST_RATE_LIMIT, TEST_SECRET_KEY, _free_port, new_database
from tests.eval_support import ingest_and_curate, kev_records

SCREENSHOTS = REPO_ROOT / "var" / "test-output" / "screenshots"
ROLES = {"curator": "read,curate", "reader": "read", "sealer": "read,curate,sealed", "admin": "admin"}
EVAL = "kev"
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
SEAL_KEY = bytes(range(32))


@dataclass
class UiServer:
    """A `goldenset serve` process on loopback over a seeded database, with a token per role."""

    url: str
    engine: Engine
    tokens: dict[str, str]
    backend: str


@dataclass
class Shots:
    """Saves a numbered, full-page screenshot of each page a test visits."""

    folder: Path
    taken: list[Path] = field(default_factory=list)

    def __call__(self, page: Page, label: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{len(self.taken) + 1:02d}-{re.sub(r'[^a-z0-9]+', '-', label.lower()).strip('-')}.png"
        page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)
        return path


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise RuntimeError("the web UI tests need Chromium: install it with `apt-get install chromium` (make test does when it runs as root)")
    return path


def make_tokens(engine: Engine) -> dict[str, str]:
    tokens = {}
    with write_session(engine) as session:
        for role, scopes in ROLES.items():
            tokens[role], _ = create_token(session=session, name=role, scopes=scopes)
        session.commit()
    return tokens


def seed_pool(engine: Engine) -> dict[str, str]:
    """The default data: CISA KEV records of 2022 curated into source `kev`, an eval `kev` with
    manual approval and a 20% sealed slice, a third of the items approved and released twice
    (June and December 2022), and a token per role."""
    ingest_and_curate(engine, "kev", kev_records(since="2022-01-01", until="2023-01-01")[:90])
    with write_session(engine) as session:
        data = EvalCreate(name=EVAL, sources=["kev"], approval_policy="manual", max_age_days=None, sealed_fraction=0.2, target_size=500)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=SEAL_KEY)
        items = list(session.exec(select(Item).where(Item.status == ItemStatus.UNIQUE.value).order_by(col(Item.occurred_at))).all())
        for item in items[: len(items) // 3]:
            item.status = ItemStatus.APPROVED.value
            session.add(item)
        session.commit()
    for at in (datetime(2022, 7, 1, 3, tzinfo=UTC), datetime(2023, 1, 1, 3, tzinfo=UTC)):
        refresh_eval(engine, name=EVAL, at=at, secret_key=TEST_SECRET_KEY, actor="test")
    return make_tokens(engine)


def _serve(url: str, extra: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    environment = {
        **os.environ,
        "GOLDENSET_DATABASE_URL": url,
        "GOLDENSET_SECRET_KEY": TEST_SECRET_KEY,
        "GOLDENSET_ENV": "test",
        "GOLDENSET_CURATE_AFTER_INGEST": "false",
        "GOLDENSET_LOG_JSON": "false",
        "GOLDENSET_LOG_LEVEL": "WARNING",
        # Every test of a module signs in to one server from 127.0.0.1.
        "GOLDENSET_SIGN_IN_RATE_LIMIT": TEST_RATE_LIMIT,
        **(extra or {}),
    }
    command = [str(Path(sys.executable).parent / "goldenset"), "serve", "--host", "127.0.0.1", "--port", str(port), "--no-scheduler"]
    process = subprocess.Popen(command, env=environment, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise RuntimeError(f"goldenset serve exited with {process.returncode}:\n{output[-4000:]}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("goldenset serve did not answer /healthz within 60 s")


@pytest.fixture(scope="module", params=BACKENDS)
def ui_server(request: pytest.FixtureRequest, _templates: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiServer]:
    """The module's seeded database served by a real `goldenset serve` (one per backend), with the
    module's `SERVER_ENVIRONMENT` (a dict) over the tests' own."""
    seed: Callable[[Engine], dict[str, str]] = getattr(request.module, "seed", seed_pool)
    with new_database(request.param, _templates, tmp_path_factory.mktemp("ui")) as url:
        engine = make_engine(url)
        try:
            tokens = seed(engine)
            process, base = _serve(url, getattr(request.module, "SERVER_ENVIRONMENT", None))
            try:
                yield UiServer(base, engine, tokens, request.param)
            finally:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        finally:
            engine.dispose()


# Package scope: the driver's event loop runs on the main thread while it is open, and must be gone
# before later tests (the client's async tests, Inspect AI) start loops of their own there.
@pytest.fixture(scope="package")
def playwright_driver() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright_driver: Playwright) -> Iterator[Browser]:
    launched = playwright_driver.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-dev-shm-usage"])
    yield launched
    launched.close()


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Shots:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)
    folder = SCREENSHOTS / request.node.module.__name__.rsplit(".", 1)[-1] / name
    if folder.exists():
        shutil.rmtree(folder)
    return Shots(folder)


@pytest.fixture
def context(browser: Browser, ui_server: UiServer) -> Iterator[BrowserContext]:
    """A fresh browser context (no cookies) that lets nothing leave loopback."""
    context = browser.new_context(base_url=ui_server.url, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(15_000)
    escaped: list[str] = []

    def only_loopback(route: object) -> None:
        request = route.request  # type: ignore[attr-defined]
        if request.url.startswith(ui_server.url) or request.url.startswith(("data:", "blob:", "about:")):
            route.continue_()  # type: ignore[attr-defined]
        else:
            escaped.append(request.url)
            route.abort()  # type: ignore[attr-defined]

    context.route("**/*", only_loopback)
    yield context
    context.close()
    assert not escaped, f"pages asked for assets outside goldenset: {escaped[:5]}"


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    """A page whose console errors fail the test."""
    opened = context.new_page()
    errors: list[str] = []
    # A refused request (a 403 the test provokes) is reported by the browser as a failed load, and
    # ReDoc's CDN logo refused by the docs' policy as a violation: neither is an error of a page.
    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource") and REDOC_LOGO not in message.text:
            errors.append(message.text)

    opened.on("console", on_console)
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    assert not errors, f"errors in the page's console: {errors[:5]}"


def sign_in(page: Page, server: UiServer, role: str) -> None:
    """Sign in through the form as `role`; ends on the overview."""
    page.goto("/ui/login")
    page.get_by_label("Token").fill(server.tokens[role])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui")


def item_id(engine: Engine, external_id: str) -> int:
    with Session(engine) as session:
        item = session.exec(select(Item).where(Item.external_id == external_id)).one()
        assert item.id is not None
        return item.id
