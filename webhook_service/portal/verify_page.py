""" "Verify our signature": how a subscriber checks that a request came from us, in the
languages they are likely to write their receiver in.

Each snippet is a file of snippets/ shown as it is: the tests run the Python one and the
openssl ones against requests we signed, so the page never shows code that does not work.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files

from aiohttp import web

from webhook_service.admin.api import AdminApi
from webhook_service.dashboard.markup import Markup, join, render
from webhook_service.portal import layout
from webhook_service.portal.layout import Brand
from webhook_service.portal.session import PortalSession
from webhook_service.portal.views import portal_page


@dataclass(frozen=True)
class Snippet:
    language: str
    file: str  # in snippets/
    note: str

    @property
    def text(self) -> str:
        return files("webhook_service.portal").joinpath("snippets", self.file).read_text()


SNIPPETS = (
    Snippet("Python", "verify.py", "With the standardwebhooks package from PyPI."),
    Snippet("Node.js", "verify.js", "With the standardwebhooks package from npm."),
    Snippet("Go", "verify.go", "With the Standard Webhooks Go library."),
    Snippet("Ruby", "verify.rb", "With the standardwebhooks gem."),
    Snippet("PHP", "verify.php", "With the Standard Webhooks PHP library."),
    Snippet(
        "Shell: openssl",
        "verify.sh",
        "No library at all: the check the libraries make, with openssl.",
    ),
    Snippet(
        "Shell: curl + openssl",
        "send-test.sh",
        "Sign a request as we do and send it to your endpoint, to try your receiver.",
    ),
)

_HOW = """<p>Every request we send you carries three headers:</p>
<dl class="facts"><dt><code>webhook-id</code></dt><dd>the message's id: the same on every
retry of it, so you can skip one you already handled</dd>
<dt><code>webhook-timestamp</code></dt><dd>when we signed it, in seconds since 1970 (UTC)</dd>
<dt><code>webhook-signature</code></dt><dd><code>v1,</code> then the base64 of the
HMAC-SHA256 of <code>id.timestamp.body</code> under your endpoint's secret (several,
separated by spaces, while a secret is being rotated)</dd></dl>
<p>Check the signature on the body <em>exactly as it arrived</em>, before parsing it, and
refuse a timestamp more than five minutes away from your clock: then nobody can forge a
request or replay an old one. Your endpoint's secret (<code>whsec_…</code>) is shown when
you add the endpoint or rotate its secret. These snippets follow the
<a href="https://www.standardwebhooks.com/">Standard Webhooks</a> specification; each
reads the secret from the <code>WEBHOOK_SECRET</code> environment variable.</p>"""


def snippet_section(snippet: Snippet) -> Markup:
    return render(
        '<section class="snippet"><h2>$language</h2><p>$note</p><pre><code>$code</code></pre>'
        "</section>",
        language=snippet.language,
        note=snippet.note,
        code=snippet.text,
    )


@portal_page
async def verify_page(
    request: web.Request, session: PortalSession, api: AdminApi, brand: Brand
) -> web.StreamResponse:
    body = join([Markup(_HOW), *(snippet_section(s) for s in SNIPPETS)])
    return layout.page("Verify our signature", body, session, brand, active="verify")
