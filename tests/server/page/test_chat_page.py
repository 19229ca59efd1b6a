"""The chat page at ``GET /`` in a real headless chromium, against the real
``hermes-trio serve`` process and the scripted model server: streaming, tool
activity, Markdown, Stop, the session, the API key prompt.

Screenshots go to the test artefacts directory (``tests/.artifacts`` or
``HERMES_TEST_ARTIFACTS``): ``chat-page-mid-stream.png``,
``chat-page-done.png``, ``chat-page-stopped.png``, ``chat-page-key.png``,
``chat-page-approval.png``, ``chat-page-approval-done.png``,
``chat-page-compacted.png``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
from browser import Browser, artifacts_dir, open_browser
from support import ServeProcess, clean_env, start_serve

from hermes_trio.server.page.route import load_page_files, page_headers
from hermes_trio.testing import (
    ScriptedModelServer,
    TextReply,
    ToolCallReply,
    open_scripted_server,
)

CODE = 'def greet(name):\n    return f"hello {name}"'
ANSWER = (
    "Here is **the plan**, read from `notes.txt`:\n\n"
    f"```python\n{CODE}\n```\n\n"
    "Markup stays text: <script>window.__pwned = 1</script> and "
    '<img src=x onerror="window.__pwned = 2">.\n\n'
    "1. greet\n2. wave\n\n" + " ".join(f"word{n}" for n in range(36)) + "."
)
LONG = " ".join(f"story{n}" for n in range(400))
KEY = "page-test-key"
# Playwright waits this long at most for anything on the page.
WAIT_MS = 8000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with open_browser() as launched:
        yield launched


@dataclass
class Tab:
    """One page in its own browser context (its own session storage), and
    what it logged."""

    page: Any
    errors: list[str] = field(default_factory=list)


def open_tab(browser: Browser, url: str) -> Tab:
    context = browser.browser.new_context(viewport={"width": 900, "height": 760})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    tab = Tab(page)
    page.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: tab.errors.append(f"page error: {e}"))
    page.goto(url)
    page.wait_for_selector("html[data-ready]", state="attached")
    return tab


def close_tab(tab: Tab) -> None:
    tab.page.context.close()


def wait_until(tab: Tab, function: str) -> None:
    """Until the JavaScript ``function`` returns something true. (Playwright's
    own wait_for_function evaluates a string, which the page's
    Content-Security-Policy forbids.)"""
    deadline = time.monotonic() + WAIT_MS / 1000
    while not tab.page.evaluate(function):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {WAIT_MS} ms: {function}")
        tab.page.wait_for_timeout(30)


def ask(tab: Tab, question: str) -> None:
    tab.page.fill("#prompt", question)
    tab.page.press("#prompt", "Enter")


def last_answer_state(tab: Tab) -> str:
    return str(tab.page.eval_on_selector(".msg.assistant:last-child", "n => n.dataset.state"))


def wait_answer(tab: Tab, count: int, state: str = "done") -> str:
    """Wait until the ``count``th answer is in ``state``; its text."""
    selector = f".msg.assistant:nth-of-type({2 * count})"
    tab.page.wait_for_selector(f'{selector}[data-state="{state}"]')
    return str(tab.page.inner_text(f"{selector} .body"))


@asynccontextmanager
async def serving(
    script: list[Any], tmp_path: Path, **env: str
) -> AsyncIterator[tuple[ServeProcess, ScriptedModelServer, str]]:
    """The scripted model, ``hermes-trio serve`` in front of it, and the
    chat page's address as serve printed it."""
    async with open_scripted_server(script) as model, trio.open_nursery() as nursery:
        environment = clean_env(
            HERMES_MODEL_BASE_URL=model.base_url, HERMES_DATA_DIR=str(tmp_path / "data"), **env
        )
        served = await start_serve(nursery, environment, tmp_path)
        with trio.fail_after(5):
            line = await served.wait_for("chat page: ")
        yield served, model, line.split("chat page: ", 1)[1].strip()
        nursery.cancel_scope.cancel()


def user_texts(request: Any) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "user"]


async def test_a_conversation_streams_shows_tools_and_stops(
    browser: Browser, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("The plan: greet people, then wave.\n")
    script = [
        ToolCallReply([("read_file", {"path": "notes.txt"})]),
        TextReply(ANSWER, delay=0.03),
        TextReply("Then we **wave**."),
        TextReply(LONG, delay=0.05),
        TextReply("A fresh start."),
    ]
    shots = artifacts_dir()
    async with serving(script, tmp_path) as (_, model, url):
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        tab = await browser.call(open_tab, browser, url)
        page = tab.page
        call = browser.call

        await call(wait_until, tab, "() => document.getElementById('model').textContent")
        assert await call(page.inner_text, "#model") == "hermes-agent"

        # The first question: a tool runs on the server, then the answer streams.
        await call(ask, tab, "What is the plan?")
        await call(page.wait_for_selector, ".tool.ok .tool-name")
        assert await call(page.inner_text, ".tool .tool-name") == "read_file"
        assert "notes.txt" in await call(page.inner_text, ".tool .tool-preview")
        await call(page.wait_for_selector, '.msg.assistant[data-state="streaming"] pre code')

        def mid_stream() -> tuple[str, str, list[int]]:
            text = page.inner_text(".msg.assistant .markdown")
            page.screenshot(path=str(shots / "chat-page-mid-stream.png"))
            state = last_answer_state(tab)
            # The answer grows while it streams: its length, sampled until done.
            lengths = []
            deadline = time.monotonic() + WAIT_MS / 1000
            while last_answer_state(tab) == "streaming" and time.monotonic() < deadline:
                lengths.append(len(page.inner_text(".msg.assistant .markdown")))
                page.wait_for_timeout(60)
            return text, state, lengths

        partial, state_then, lengths = await call(mid_stream)
        assert state_then == "streaming"
        assert "word35" not in partial
        assert len(set(lengths)) >= 3 and lengths == sorted(lengths)
        done = await call(wait_answer, tab, 1)
        await call(page.screenshot, path=str(shots / "chat-page-done.png"))
        assert "word35." in done and len(done) > len(partial)

        def rendered() -> dict[str, Any]:
            return dict(
                page.evaluate(
                    """() => {
                        const answer = document.querySelector('.msg.assistant .markdown');
                        const code = answer.querySelector('pre > code');
                        return {
                            code: code.textContent,
                            language: code.className,
                            strong: answer.querySelector('strong').textContent,
                            items: [...answer.querySelectorAll('ol > li')]
                                .map((li) => li.textContent),
                            text: answer.textContent,
                            elements: answer.querySelectorAll('script, img, iframe').length,
                            pwned: window.__pwned === undefined ? null : window.__pwned,
                            tool: document.querySelector('.tool .tool-status').textContent,
                        };
                    }"""
                )
            )

        shown = await call(rendered)
        assert shown["code"] == CODE and shown["language"] == "language-python"
        assert shown["strong"] == "the plan" and shown["items"] == ["greet", "wave"]
        assert "<script>window.__pwned = 1</script>" in shown["text"]
        assert '<img src=x onerror="window.__pwned = 2">' in shown["text"]
        assert shown["elements"] == 0 and shown["pwned"] is None
        assert shown["tool"].startswith("done")

        # The second question continues the conversation on the server.
        await call(ask, tab, "And then?")
        assert await call(wait_answer, tab, 2) == "Then we wave."
        assert user_texts(model.model_requests[2]) == ["What is the plan?", "And then?"]
        history = model.model_requests[2].json["messages"]
        assert "word35." in [m for m in history if m["role"] == "assistant"][-1]["content"]

        # Stop mid-answer closes the connection, and with it the model's.
        await call(ask, tab, "Tell me a long story.")
        await call(wait_until, tab, "() => /story20/.test(document.body.innerText)")
        await call(page.click, "#stop")
        with trio.fail_after(3):
            closed = await model.wait_connection_closed()
        assert closed.closed_by == "client"
        stopped = await call(wait_answer, tab, 3, "stopped")
        await call(page.screenshot, path=str(shots / "chat-page-stopped.png"))
        assert "story20" in stopped and "story399" not in stopped
        assert await call(page.is_visible, "#send")
        assert not await call(page.is_visible, "#stop")

        # New chat: a new session, which the model sees without the history.
        await call(page.click, "#new-chat")
        assert await call(page.eval_on_selector_all, ".msg", "nodes => nodes.length") == 0
        await call(ask, tab, "Hello again.")
        assert await call(wait_answer, tab, 1) == "A fresh start."
        assert user_texts(model.model_requests[-1]) == ["Hello again."]
        assert tab.errors == []
        await call(close_tab, tab)


async def test_approve_and_deny_a_command_on_the_page(browser: Browser, tmp_path: Path) -> None:
    # Flagged (reboot) but harmless: the marker says whether it ran.
    ran, denied = tmp_path / "ran", tmp_path / "denied"
    script = [
        ToolCallReply([("terminal", {"command": f"touch {ran}; exit 0; reboot"})]),
        TextReply("Tidied **up**."),
        ToolCallReply([("terminal", {"command": f"touch {denied}; exit 0; reboot"})]),
        TextReply("Left as it was."),
    ]
    shots = artifacts_dir()
    async with serving(script, tmp_path, API_SERVER_KEY=KEY) as (_, model, url):
        tab = await browser.call(open_tab, browser, url)
        page = tab.page
        call = browser.call

        def give_key() -> None:
            page.wait_for_selector("#key-dialog[open]")
            page.fill("#key-input", KEY)
            page.press("#key-input", "Enter")

        await call(give_key)
        await call(wait_until, tab, "() => document.getElementById('model').textContent")

        await call(ask, tab, "Tidy up, please.")
        await call(page.wait_for_selector, ".approval.waiting button.approve")
        shown = await call(
            page.evaluate,
            """() => {
                const box = document.querySelector('.approval');
                return {
                    command: box.querySelector('.approval-command').textContent,
                    reason: box.querySelector('.approval-reason').textContent,
                    tool: box.querySelector('.tool-name').textContent,
                    buttons: [...box.querySelectorAll('button')].map((b) => b.textContent),
                };
            }""",
        )
        assert shown["command"] == f"touch {ran}; exit 0; reboot"
        assert "rebooting" in shown["reason"] and shown["tool"] == "terminal"
        assert shown["buttons"] == ["Approve", "Deny"]
        assert await call(last_answer_state, tab) == "streaming"
        await call(page.screenshot, path=str(shots / "chat-page-approval.png"))
        assert not ran.exists()

        await call(page.click, ".approval button.approve")
        await call(page.wait_for_selector, '.approval[data-outcome="approved"]')
        assert (await call(wait_answer, tab, 1)).endswith("Tidied up.")
        assert ran.exists()
        status = await call(page.inner_text, '.approval[data-outcome="approved"] .approval-status')
        assert status == "Approved by default"
        assert await call(page.locator(".approval button").count) == 0

        await call(ask, tab, "And the other one?")
        await call(
            page.wait_for_selector, ".msg.assistant:nth-of-type(4) .approval.waiting button.deny"
        )
        await call(page.click, ".msg.assistant:nth-of-type(4) .approval button.deny")
        await call(page.wait_for_selector, '.approval[data-outcome="denied"]')
        assert "Left as it was." in await call(wait_answer, tab, 2)
        await call(page.screenshot, path=str(shots / "chat-page-approval-done.png"))
        assert await call(page.inner_text, '.approval[data-outcome="denied"] .approval-status') == (
            "Denied by default"
        )
        assert not denied.exists()
        refusal = [m for m in model.model_requests[3].json["messages"] if m["role"] == "tool"]
        assert "denied" in refusal[-1]["content"]
        # The one 401 is the first request without a key, which asked for it.
        assert [e for e in tab.errors if "401" not in e] == []
        await call(close_tab, tab)


async def test_the_page_asks_for_the_key_and_refuses_a_wrong_one(
    browser: Browser, tmp_path: Path
) -> None:
    async with serving([TextReply("Hello with a key.")], tmp_path, API_SERVER_KEY=KEY) as (
        _,
        model,
        url,
    ):
        tab = await browser.call(open_tab, browser, url)
        page = tab.page
        call = browser.call
        await call(page.wait_for_selector, "#key-dialog[open] #key-input")

        def wrong_key() -> str:
            page.fill("#key-input", "not-the-key")
            page.press("#key-input", "Enter")
            page.wait_for_selector("#key-error:not([hidden])")
            page.screenshot(path=str(artifacts_dir() / "chat-page-key.png"))
            return str(page.inner_text("#key-error"))

        refused = await call(wrong_key)
        assert refused.startswith("The server refused this key: invalid or missing API key")
        assert await call(page.is_visible, "#key-dialog")

        def right_key() -> None:
            page.fill("#key-input", KEY)
            page.press("#key-input", "Enter")
            page.wait_for_selector("#key-dialog", state="hidden")
            wait_until(tab, "() => document.getElementById('model').textContent")

        await call(right_key)
        assert await call(page.inner_text, "#model") == "hermes-agent"
        await call(ask, tab, "Hi")
        assert await call(wait_answer, tab, 1) == "Hello with a key."
        stored = await call(
            page.evaluate,
            "() => [sessionStorage.getItem('hermes-trio.api-key'), localStorage.length]",
        )
        assert stored == [KEY, 0]
        assert len(model.model_requests) == 1
        await call(close_tab, tab)


# Markdown in, the HTML the page builds from it out.
MARKDOWN = [
    (
        "plain *em* **strong** ~~gone~~ `co*de*`",
        "<p>plain <em>em</em> <strong>strong</strong> <del>gone</del> <code>co*de*</code></p>",
    ),
    ("snake_case_name and 2 * 3 * 4", "<p>snake_case_name and 2 * 3 * 4</p>"),
    ("one\ntwo", "<p>one<br>two</p>"),
    ("# Title\n## Sub", "<h1>Title</h1><h2>Sub</h2>"),
    (
        "```js\nlet a = '<b>';\n```",
        '<pre data-language="js"><code class="language-js">let a = \'&lt;b&gt;\';</code></pre>',
    ),
    ("```\nstill open", "<pre><code>still open</code></pre>"),
    ("- a\n- b\n  - c\n- d", "<ul><li>a</li><li>b<ul><li>c</li></ul></li><li>d</li></ul>"),
    ("3. three\n4. four", '<ol start="3"><li>three</li><li>four</li></ol>'),
    ("- a\n\n- b", "<ul><li><p>a</p></li><li><p>b</p></li></ul>"),
    (
        "1. step:\n   ```sh\n   ls\n   ```",
        '<ol><li>step:<pre data-language="sh"><code class="language-sh">ls</code></pre></li></ol>',
    ),
    ("> quoted\n> more", "<blockquote><p>quoted<br>more</p></blockquote>"),
    ("---", "<hr>"),
    (
        "| a | b |\n|:--|--:|\n| 1 | 2 |",
        '<div class="table-wrap"><table><thead><tr><th class="align-left">a</th>'
        '<th class="align-right">b</th></tr></thead><tbody><tr><td class="align-left">1</td>'
        '<td class="align-right">2</td></tr></tbody></table></div>',
    ),
    (
        "[docs](https://example.org/a?b=1)",
        '<p><a href="https://example.org/a?b=1" target="_blank" rel="noopener noreferrer">'
        "docs</a></p>",
    ),
    (
        "see https://example.org/x.",
        '<p>see <a href="https://example.org/x" target="_blank" '
        'rel="noopener noreferrer">https://example.org/x</a>.</p>',
    ),
    ("[click](javascript:alert(1))", "<p>click</p>"),
    ("[x](data:text/html,hi)", "<p>x</p>"),
    ("<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"),
    ('<img src=x onerror="alert(1)">', '<p>&lt;img src=x onerror="alert(1)"&gt;</p>'),
    ("![alt](javascript:x)", "<p>alt</p>"),
    ("**unclosed", "<p>**unclosed</p>"),
    ("a \\*b\\* c", "<p>a *b* c</p>"),
    (
        '```"><img src=x onerror=alert(1)>\nx\n```',
        '<pre data-language="img"><code class="language-img">x</code></pre>',
    ),
]


# Unmatched delimiters by the ten thousand: each stays text, and rendering
# them takes one pass, not one per delimiter (Playwright's timeout would catch
# a page that hangs).
PATHOLOGICAL = ["*a " * 10_000, "~~d " * 10_000, "[" * 20_000, "_b " * 10_000, "**c " * 5_000]


def render_markdown(browser: Browser, cases: list[str], what: str = "innerHTML") -> list[str]:
    """Each case through the page's renderer, on the page's own files with
    its headers (no server: Playwright answers the requests)."""
    files = load_page_files()

    def fulfil(route: Any) -> None:
        path = route.request.url.split("page.test", 1)[1]
        name = "index.html" if path == "/" else path.removeprefix("/page/")
        if name not in files:
            route.fulfill(status=404, content_type="application/json", body="{}")
            return
        file = files[name]
        route.fulfill(
            status=200,
            headers={**page_headers(file), "Content-Type": file.content_type},
            body=file.body,
        )

    context = browser.browser.new_context()
    try:
        page = context.new_page()
        page.route("http://page.test/**", fulfil)
        page.goto("http://page.test/")
        page.wait_for_selector("html[data-ready]", state="attached")
        return list(
            page.evaluate(
                """async ([cases, what]) => {
                    const { renderMarkdown } = await import('/page/markdown.js');
                    return cases.map((text) => {
                        const box = document.createElement('div');
                        box.append(renderMarkdown(text));
                        return box[what];
                    });
                }""",
                [cases, what],
            )
        )
    finally:
        context.close()


async def test_markdown_is_rendered_as_elements_never_as_html(browser: Browser) -> None:
    html = await browser.call(render_markdown, browser, [text for text, _ in MARKDOWN])
    wrong = [
        f"{text!r}\n  got      {got}\n  expected {want}"
        for (text, want), got in zip(MARKDOWN, html, strict=True)
        if got != want
    ]
    assert not wrong, "\n".join(wrong)


async def test_unmatched_delimiters_stay_text(browser: Browser) -> None:
    texts = await browser.call(render_markdown, browser, PATHOLOGICAL, "textContent")
    assert texts == [text.strip() for text in PATHOLOGICAL]


async def test_a_compaction_shows_as_a_divider(browser: Browser, tmp_path: Path) -> None:
    # A small window: the third long question makes the server summarise
    # the first two exchanges before it asks the model.
    question = "Please remember this: " + "lorem ipsum " * 230
    script = [
        TextReply("Noted, the first."),
        TextReply("Noted, the second."),
        TextReply("The user asked me to remember two long notes."),
        TextReply("Both are remembered."),
    ]
    config = tmp_path / "config.yaml"
    config.write_text(
        "model:\n  context_window: 2400\nagent:\n  tools: []\n"
        "compaction:\n  keep_recent: 200\n  summary_max_tokens: 100\n"
    )
    # The window of the file, not the one clean_env gives.
    env = {"HERMES_CONFIG": str(config), "HERMES_CONTEXT_WINDOW": ""}
    async with serving(script, tmp_path, **env) as (_, model, url):
        tab = await browser.call(open_tab, browser, url)
        call = browser.call
        for n in (1, 2):
            await call(ask, tab, f"{n}: {question}")
            await call(wait_answer, tab, n)
        await call(ask, tab, f"3: {question}")
        assert (await call(wait_answer, tab, 3)).endswith("Both are remembered.")
        divider = await call(tab.page.inner_text, ".msg.assistant:nth-of-type(6) .context-divider")
        assert divider.startswith("Earlier conversation summarised (")
        assert divider.endswith(" tokens)") and " → " in divider
        assert await call(tab.page.get_attribute, ".context-divider", "role") == "separator"
        await call(tab.page.screenshot, path=str(artifacts_dir() / "chat-page-compacted.png"))
        assert "remember" in str(model.model_requests[2].json["messages"])
        assert tab.errors == []
        await call(close_tab, tab)
