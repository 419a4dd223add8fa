"""The browser side of the Open WebUI benchmarks: `DRIVER`, a Playwright script run in its own process (Debian's
chromium with `CHROMIUM_FLAGS`) that asks the questions, reads the answers as shown, the chat's title and the
chat as Open WebUI stored it; `stored_replies` reads that stored chat.
"""

from __future__ import annotations

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


DRIVER = r"""
import json, sys, time
from playwright.sync_api import sync_playwright
url, model, questions, timeout_s, flags = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
shot, steps_file, chat_file = sys.argv[6], sys.argv[7], sys.argv[8]
token = sys.argv[9] if len(sys.argv) > 9 else ""  # an Open WebUI user's token when auth is on
out = {"steps": []}
def step(name, **kw):
    out["steps"].append({"step": name, "t": round(time.monotonic() - t0, 2), **kw}); print(json.dumps(out["steps"][-1]), flush=True)
    open(steps_file, "a").write(json.dumps(out["steps"][-1]) + "\n")
def last_answer(page):
    items = page.locator("#response-content-container")
    return items.nth(items.count() - 1).inner_text() if items.count() else ""
def wait_answer(page, n, limit):
    ends = time.monotonic() + limit
    stable, last = 0, None
    while time.monotonic() < ends:
        items = page.locator("#response-content-container")
        if items.count() >= n:
            text = items.nth(n - 1).inner_text()
            generating = page.locator("button[aria-label='Stop'], #stop-response-button").count() > 0
            if text.strip() and text == last and not generating:
                stable += 1
                if stable >= 3:
                    return text
            else:
                stable = 0
            last = text
        time.sleep(1.0)
    return None
def ask(page, text):
    box = page.locator("#chat-input")
    box.click()
    box.fill(text) if box.evaluate("e => e.tagName") == "TEXTAREA" else page.keyboard.type(text)
    page.keyboard.press("Enter")
t0 = time.monotonic()
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=flags, headless=True)
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.set_default_timeout(60000)
    if token:
        page.add_init_script("localStorage.setItem('token', " + json.dumps(token) + ")")
    page.goto(url + "/?models=" + model, wait_until="domcontentloaded", timeout=180000)  # socket.io: never idle
    step("page_loaded", title=page.title())
    page.wait_for_selector("#chat-input", timeout=300000)  # single-user mode (or the token) signs in (slow when busy)
    time.sleep(3)
    for label in ("Okay, Let's Go!", "Got it"):  # the release-notes modal of a fresh install
        btn = page.get_by_role("button", name=label)
        if btn.count():
            btn.first.click()
            time.sleep(1)
    step("chat_ready")
    for n, question in enumerate(questions, start=1):
        ask(page, question)
        step("sent", n=n, question=question)
        text = wait_answer(page, n, timeout_s)
        step("answered", n=n, ok=text is not None, text=(text or last_answer(page))[:3000])
    time.sleep(5)
    step("title", title=page.title())
    page.screenshot(path=shot, full_page=True)
    token = page.evaluate("() => localStorage.token")
    auth = {"Authorization": f"Bearer {token}"}
    chats = page.request.get(url + "/api/v1/chats/", headers=auth).json()
    chat = page.request.get(url + "/api/v1/chats/" + chats[0]["id"], headers=auth).json()
    open(chat_file, "w").write(json.dumps(chat))
    step("stored_chat", chats=len(chats))
    browser.close()
"""


def stored_replies(chat: dict) -> list[tuple[str, list[dict]]]:
    """The assistant messages of Open WebUI's stored chat, in order: (content, [{"name", "url"}, ...])."""
    history = chat.get("chat", {}).get("history", {})
    messages, at, chain = history.get("messages", {}), history.get("currentId"), []
    while at and at in messages and len(chain) <= len(messages):  # the current branch, newest first
        chain.append(messages[at])
        at = messages[at].get("parentId")
    replies = []
    for message in reversed(chain):
        if message.get("role") == "assistant":
            sources = [
                {"name": s.get("source", {}).get("name", ""), "url": s.get("source", {}).get("url", "")}
                for s in message.get("sources") or []
            ]
            replies.append((message.get("content", ""), sources))
    return replies
