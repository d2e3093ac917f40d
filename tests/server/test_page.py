"""The page as HTTP serves it: holding the token for its scripts, self-contained, never cached.

In process, over the server's real app on a SQLite file: what a browser is
sent, not what it does with it (that is test_page_browser.py). Who may
fetch the page and its files at all is test_server_access.py's.
"""

from __future__ import annotations

import re

from cli.treadle_cli import Cli
from server.conftest import TOKEN, serving
from treadle._server._page import PAGE_DIR
from treadle._stores._tokens import token_hash

_IMPORT = re.compile(r"""^\s*(?:import|export)\s[^'"]*?from\s+["']([^"']+)["']""", re.MULTILINE)


async def test_the_page_carries_the_token_for_its_changes_and_is_never_cached_or_framed(
    sqlite_url,
):
    async with serving(sqlite_url, apps=("page_app",), headers={}) as api:
        assert (await api.get(f"/?token={TOKEN}")).status_code == 303  # sets the cookie
        page = await api.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert f'<meta name="treadle-token" content="{TOKEN}">' in page.text
    assert "{{token}}" not in page.text
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "no-referrer"
    policy = page.headers["content-security-policy"]
    for rule in ("script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"):
        assert rule in policy


async def test_every_module_the_page_loads_is_served_from_here(sqlite_url):
    """No CDN, no build step: each module the pages reach by import is a file the server sends."""
    async with serving(sqlite_url, apps=("page_app",)) as api:
        page = (await api.get("/")).text
        assert not re.search(r"""(src|href)=["'](https?:)?//""", page)
        assert 'src="/static/app.js"' in page
        link_page = (await api.get("/answer/any-link")).text  # an answer link's page
        roots = re.findall(
            r'<script type="module" src="/(?:answer/)?static/([\w.]+)"', page + link_page
        )
        assert {"app.js", "answer.js"} <= set(roots)
        queue, seen = roots, set()
        while queue:
            name = queue.pop()
            if name in seen:
                continue
            seen.add(name)
            answer = await api.get(f"/static/{name}")
            assert answer.status_code == 200, name
            assert "javascript" in answer.headers["content-type"], name
            for target in _IMPORT.findall(answer.text):
                assert target.startswith("./"), f"{name} imports {target} from elsewhere"
                queue.append(target.removeprefix("./"))
        css = await api.get("/static/style.css")
    assert seen == {path.name for path in (PAGE_DIR / "static").glob("*.js")}, "an unused module"
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")


async def test_only_the_static_directory_is_served(sqlite_url):
    async with serving(sqlite_url, apps=("page_app",)) as api:
        for path in (
            "/static/../_page.py",
            "/static/%2e%2e/_page.py",
            "/static/%2e%2e/index.html",
            "/static/index.html",
        ):
            assert (await api.get(path)).status_code == 404, path


async def test_a_page_fetched_with_a_named_token_never_carries_the_servers(sqlite_url):
    # Without sign-in, a page fetched with a viewer's named token carried the server's own
    # (admin) token in its meta tag: the viewer read it and acted as admin.
    viewer = "tdl_" + "v" * 43
    async with serving(sqlite_url, apps=("page_app",), headers={}) as api:
        await api.store.add_token("vic", "viewer", token_hash(viewer), created_by="test")
        page = await api.get("/", headers={"Authorization": f"Bearer {viewer}"})
        assert page.status_code == 200
        assert TOKEN not in page.text
        assert '<meta name="treadle-token" content="">' in page.text
        assert (await api.get(f"/?token={TOKEN}")).status_code == 303  # the server token's page
        assert f'content="{TOKEN}"' in (await api.get("/")).text  # still carries it


def test_a_named_token_may_not_take_the_server_tokens_name(tmp_path):
    # token:server is how the record names the server's own token: a viewer's named token
    # called "server" could not be told from it.
    done = Cli(tmp_path)("tokens", "create", "server", "--role", "viewer")
    assert done.returncode == 2, done.stdout
    assert "'server' names the server's own token on the record" in done.stderr
