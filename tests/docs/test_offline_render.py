"""The docs site and the service's /docs and /redoc render with no network.

Headless Chromium loads each page through a proxy that answers nothing (``--proxy-server=127.0.0.1:9``;
Chromium still reaches 127.0.0.1 directly), so any asset fetched from a CDN or Google Fonts fails. A page
passes when its DOM, after its scripts ran, holds text only rendering puts there, and its screenshot shows
the colours its stylesheet paints. Without Chromium (``make test`` installs it, scripts/ensure-chromium.sh)
those tests skip; the checks of the HTML itself run everywhere.
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))
from pngcheck import near, pixels, read_png  # noqa: E402
from svc_helpers import LiveServer  # noqa: E402

#: builds the site, serves it and the service, drives a browser: tens of seconds. Under pytest-xdist the tests
#: share one worker (group docs-site), so the site is built once and Chromium runs one page at a time.
pytestmark = [pytest.mark.slow, pytest.mark.service, pytest.mark.xdist_group("docs-site")]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                                    "(apt-get install chromium; make test installs it)")

#: an external asset: a script, a stylesheet or a font loaded from another host
_EXTERNAL_ASSET = re.compile(r"""<(?:script[^>]*\ssrc|link[^>]*\shref)=["'](?:https?:)?//(?!127\.0\.0\.1|localhost)""",
                             re.I)
#: Material's header (indigo, #4051b5) and Swagger UI's POST operation (#49cc90)
MATERIAL_HEADER = (0x40, 0x51, 0xB5)
SWAGGER_POST = (0x49, 0xCC, 0x90)


def _chromium(url: str, out: Path) -> str:
    """The page's DOM after its scripts ran, and its screenshot at ``out``; no network but 127.0.0.1."""
    base = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--proxy-server=127.0.0.1:9", "--virtual-time-budget=15000", "--window-size=1280,900",
            f"--user-data-dir={out.parent / 'chromium-profile'}"]
    subprocess.run([*base, f"--screenshot={out}", url], check=True, capture_output=True, timeout=120)
    dom = subprocess.run([*base, "--dump-dom", url], check=True, capture_output=True, timeout=120, text=True)
    return dom.stdout


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The docs site as ``make docs`` builds it (generated pages, then a strict build)."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def site_url(site):
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def service():
    from mgmatch.app.api import build_asgi
    from mgmatch.app.runtime import Runtime
    from mgmatch.app.settings import Settings

    with LiveServer(build_asgi(Runtime.build(Settings(config=None)))) as srv:
        yield srv


def test_built_pages_load_nothing_from_another_host(site):
    pages = list(site.rglob("*.html"))
    assert len(pages) > 30, "the site has its pages"
    for page in pages:
        html = page.read_text(encoding="utf-8")
        found = _EXTERNAL_ASSET.search(html)
        assert found is None, f"{page.relative_to(site)} loads {html[found.start():found.start() + 120]!r}"
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html, page


def test_service_docs_pages_use_the_packaged_assets(service):
    for path in ("/docs", "/redoc"):
        html = httpx.get(service.url + path).text
        assert _EXTERNAL_ASSET.search(html) is None and "fonts.googleapis" not in html, (path, html[:400])
        assets = re.findall(r"""(?:src|href)=["'](/docs-assets/[^"']+)""", html)
        assert assets, (path, html[:400])
        for asset in assets:
            r = httpx.get(service.url + asset)
            assert r.status_code == 200 and len(r.content) > 1000, (asset, r.status_code)


@needs_chromium
def test_docs_site_renders_offline(site_url, tmp_path):
    shot = tmp_path / "budgets.png"
    dom = _chromium(f"{site_url}/benchmarks/budgets/", shot)
    # the generated table and Material's navigation, both in the rendered page
    assert "12v12-deep" in dom and "budget ms" in dom and "md-nav" in dom, dom[:500]
    _, height, rows = read_png(shot)
    assert height >= 800
    header = pixels(rows, 0, 40)
    assert near(header, MATERIAL_HEADER) > 0.5 * sum(header.values()), "Material's stylesheet did not load"
    body = pixels(rows, 60)
    assert len(body) > 20, "the page body is blank"


@needs_chromium
def test_service_swagger_ui_renders_offline(service, tmp_path):
    shot = tmp_path / "swagger.png"
    dom = _chromium(f"{service.url}/docs", shot)
    # operations listed by Swagger UI's script from /openapi.json (the served HTML has none of them)
    assert "/v1/tickets/batch" in dom and "opblock" in dom, dom[:500]
    _, _, rows = read_png(shot)
    assert near(pixels(rows), SWAGGER_POST) > 100, "Swagger UI's stylesheet did not paint the operations"


@needs_chromium
def test_service_redoc_renders_offline(service, tmp_path):
    shot = tmp_path / "redoc.png"
    dom = _chromium(f"{service.url}/redoc", shot)
    assert "Queue a player or a party" in dom, dom[:500]
    _, _, rows = read_png(shot)
    assert len(pixels(rows)) > 20, "ReDoc's page is blank"
