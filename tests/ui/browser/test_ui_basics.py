"""Signing in and out, the overview, CSRF on every form, the session cookie, and the API
documentation working without the internet."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, Page, expect

from tests.ui.browser.conftest import EVAL, Shots, UiServer, sign_in


def test_a_person_signs_in_sees_the_overview_and_signs_out(page: Page, context: BrowserContext, ui_server: UiServer, shots: Shots) -> None:
    page.goto("/")
    expect(page).to_have_url(f"{ui_server.url}/ui/login")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    shots(page, "sign in")

    page.get_by_label("Token").fill("gs_not_a_token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")

    sign_in(page, ui_server, "curator")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    evals = page.get_by_role("table").first
    expect(evals).to_contain_text(EVAL)
    expect(page.get_by_role("heading", name="Latest releases")).to_be_visible()
    shots(page, "overview")

    cookie = next(cookie for cookie in context.cookies() if cookie["name"] == "goldenset_ui")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{ui_server.url}/ui/login")
    # The old cookie opens nothing once signed out, even if someone kept a copy.
    context.add_cookies([{"name": cookie["name"], "value": cookie["value"], "url": ui_server.url + "/ui"}])
    page.goto("/ui")
    expect(page).to_have_url(f"{ui_server.url}/ui/login")


def test_a_page_asked_for_before_signing_in_comes_back_after(page: Page, ui_server: UiServer) -> None:
    page.goto("/ui/evals")
    expect(page).to_have_url(f"{ui_server.url}/ui/login?next=%2Fui%2Fevals")
    page.get_by_label("Token").fill(ui_server.tokens["reader"])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{ui_server.url}/ui/evals")


def test_state_changing_requests_need_the_session_csrf_value(page: Page, context: BrowserContext, ui_server: UiServer) -> None:
    # The sign-in form itself: without the value of its own cookie, refused.
    refused = context.request.post("/ui/login", form={"token": ui_server.tokens["curator"], "csrf": "forged"})
    assert refused.status == 403
    sign_in(page, ui_server, "curator")
    forms: list[dict[str, str | float | bool]] = [{}, {"csrf": ""}, {"csrf": "forged"}]
    for form in forms:
        answer = context.request.post("/ui/logout", form=form, max_redirects=0)
        assert answer.status == 403, form
        assert "Form refused" in answer.text()
    # Still signed in: none of them signed the person out.
    page.goto("/ui")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_the_api_documentation_renders_without_the_internet(page: Page, shots: Shots) -> None:
    page.goto("/docs")
    expect(page.locator(".opblock").first).to_be_visible(timeout=30_000)
    shots(page, "swagger")
    page.goto("/redoc")
    # ReDoc parses the whole OpenAPI document in the page before it draws anything.
    expect(page.get_by_role("heading", name="goldenset").first).to_be_visible(timeout=60_000)
    shots(page, "redoc")
