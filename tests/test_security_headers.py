"""Headers for a public deployment: the Content-Security-Policy, HSTS and proxy settings from
the environment, `Cache-Control: no-store` on everything that shows a user's memory, and a
clean `manage.py check --deploy` with production settings."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connections
from django.http import HttpResponse

from tests.settings_process import ROOT, load_settings

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
TEMPLATE_DIRS = [ROOT / "templates", *sorted(ROOT.glob("*/templates"))]
INLINE_CODE = {
    "an inline <script>": re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.I),
    "a <style> element": re.compile(r"<style\b", re.I),
    "a style attribute": re.compile(r"\sstyle\s*=", re.I),
    "an event handler attribute": re.compile(r"\son[a-z]+\s*=", re.I),
    "an hx-on attribute": re.compile(r"\s(?:data-)?hx-on", re.I),
    "a javascript: URL": re.compile(r"javascript:", re.I),
}
TEMPLATE_COMMENT = re.compile(r"{%\s*comment\s*%}.*?{%\s*endcomment\s*%}|{#.*?#}", re.S)


def directives(response: HttpResponse) -> set[str]:
    return {part.strip().lower() for part in response.get("Cache-Control", "").split(",")}


# --- Content-Security-Policy -------------------------------------------------------------


@pytest.mark.django_db
def test_pages_carry_the_policy_and_the_other_security_headers(client, alice):
    client.force_login(alice)
    for path in ("/login/", "/", "/agents/"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response["Content-Security-Policy"] == POLICY, path
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"
        assert response["Cross-Origin-Opener-Policy"] == "same-origin"
        assert "Strict-Transport-Security" not in response  # plain HTTP, HSTS off


@pytest.mark.django_db
def test_swagger_ui_relaxes_only_styles_and_loads_its_script_from_itself(client):
    page = client.get("/api/docs/")
    script = client.get("/api/docs/?script=")

    assert page.status_code == 200
    assert page["Content-Security-Policy"] == POLICY.replace(
        "style-src 'self'", "style-src 'self' 'unsafe-inline'"
    )
    assert '<script src="/api/docs/?script="></script>' in page.content.decode()
    assert "<script>" not in page.content.decode()
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in script.content.decode()


@pytest.mark.django_db
def test_templates_hold_no_inline_code_and_htmx_injects_none(client):
    found = []
    for folder in TEMPLATE_DIRS:
        for template in sorted(folder.rglob("*.html")):
            text = TEMPLATE_COMMENT.sub("", template.read_text())
            found += [
                f"{template.relative_to(ROOT)}: {what}"
                for what, pattern in INLINE_CODE.items()
                if pattern.search(text)
            ]
    assert not found, found

    html = client.get("/login/").content.decode()
    meta = re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", html)
    assert meta, "the page has no htmx-config"
    config = json.loads(meta[1])
    assert config["includeIndicatorStyles"] is False  # else htmx adds an inline <style>
    assert config["allowEval"] is False


# --- HSTS, HTTPS redirects and the proxy, from the environment ----------------------------

NAMES = [
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_SSL_REDIRECT",
    "USE_X_FORWARDED_HOST",
    "SECURE_PROXY_SSL_HEADER == ('HTTP_X_FORWARDED_PROTO', 'https')",
    "SESSION_COOKIE_SECURE",
]
DROP = ("MNEMO_", "DATABASE_URL", "SECRET_KEY", "ALLOWED_HOSTS")


def read(tmp_path: Path, **environment: str) -> list[str]:
    result = load_settings(tmp_path, NAMES, drop=DROP, **environment)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_defaults_turn_on_no_hsts_no_redirect_and_trust_no_proxy(tmp_path):
    assert read(tmp_path) == ["0", "True", "False", "False", "False", "False", "False"]


def test_the_default_of_this_process_is_plain_http():
    # The test run sets no MNEMO_* security variable (and is embedded unless DATABASE_URL is).
    assert settings.SECURE_HSTS_SECONDS == 0
    assert settings.SECURE_SSL_REDIRECT is False
    assert settings.SECURE_PROXY_SSL_HEADER is None


def test_production_values_are_read(tmp_path):
    values = read(
        tmp_path,
        MNEMO_HSTS_SECONDS="31536000",
        MNEMO_HSTS_INCLUDE_SUBDOMAINS="false",
        MNEMO_HSTS_PRELOAD="true",
        MNEMO_SSL_REDIRECT="true",
        MNEMO_BEHIND_PROXY="true",
        MNEMO_SECURE_COOKIES="true",
    )
    assert values == ["31536000", "False", "True", "True", "True", "True", "True"]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("MNEMO_HSTS_SECONDS", "a year", "MNEMO_HSTS_SECONDS='a year' is not a whole number."),
        ("MNEMO_HSTS_SECONDS", "-1", "MNEMO_HSTS_SECONDS=-1 must be at least 0."),
        ("MNEMO_SSL_REDIRECT", "maybe", "MNEMO_SSL_REDIRECT='maybe' is not a boolean"),
        ("MNEMO_HSTS_PRELOAD", "2", "MNEMO_HSTS_PRELOAD='2' is not a boolean"),
        ("MNEMO_BEHIND_PROXY", "nginx", "MNEMO_BEHIND_PROXY='nginx' is not a boolean"),
    ],
)
def test_bad_values_stop_the_process(tmp_path, variable, value, message):
    result = load_settings(tmp_path, NAMES[:1], drop=DROP, **{variable: value})
    assert result.returncode != 0
    assert message in result.stderr


# --- Cache-Control: no-store --------------------------------------------------------------


@pytest.mark.django_db
def test_every_signed_in_page_is_no_store_and_static_files_are_not(client, alice, settings):
    settings.WHITENOISE_USE_FINDERS = True  # serve static files from the source folders
    settings.WHITENOISE_AUTOREFRESH = True
    client.force_login(alice)
    for path in (
        "/",
        "/?tab=entries",
        "/documents/",
        "/search/?q=tea",
        "/activity/",
        "/work/",
        "/agents/",
        "/settings/",
        "/deleted/",
        "/no-such-page/",
    ):
        response = client.get(path)
        assert response.status_code in (200, 404), path
        assert "no-store" in directives(response), (path, response.get("Cache-Control"))

    # A view that says no-store itself (never_cache) keeps its own header.
    agents = client.get("/agents/")
    assert agents["Cache-Control"] == "max-age=0, no-cache, no-store, must-revalidate, private"

    static = client.get("/static/css/mnemo.css")
    assert static.status_code == 200
    assert "no-store" not in directives(static)
    assert "max-age" in static["Cache-Control"]


@pytest.mark.django_db
def test_every_api_answer_is_no_store(client, call_tool, alice_token):
    auth = {"Authorization": f"Bearer {alice_token}"}
    answers = [
        call_tool(alice_token, "create_memory", {"key": "fact:tea", "value": "green"}),
        call_tool(alice_token, "list_memories", {}),
        call_tool(alice_token, "get_memory", {"key": "fact:none"}),  # a 404
        client.get("/api/v1/working-memory", headers=auth),
        client.get("/api/v1/tools", headers=auth),
        client.get("/api/v1/working-memory"),  # a 401
    ]
    assert [answer.status_code for answer in answers] == [201, 200, 404, 200, 200, 401]
    for answer in answers:
        assert answer["Cache-Control"] == "no-store", answer.content


# --- manage.py check --deploy -------------------------------------------------------------


def deploy_check(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess:
    """`manage.py check --deploy --fail-level WARNING` with production settings.

    Django 6.1's model checks read the server version (generated columns), so the database
    must answer: the test run's own server (its DATABASE_URL, or the embedded one's socket).
    """
    database = connections["default"].settings_dict
    # postgres://user:password@:port//socket/dir/name: a path starting with / is the socket
    # folder.
    user = f"{database['USER']}:{quote(database['PASSWORD'], safe='')}"
    socket_url = f"postgres://{user}@:{database['PORT']}/{quote(database['HOST'])}"
    environment = {k: v for k, v in os.environ.items() if not k.startswith(DROP)}
    environment |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "MNEMO_DATA_DIR": str(tmp_path),
        "DATABASE_URL": os.environ.get("DATABASE_URL") or f"{socket_url}/postgres",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "MNEMO_SECURE_COOKIES": "true",
        "MNEMO_HSTS_SECONDS": "31536000",
        "MNEMO_SSL_REDIRECT": "true",
        "ALLOWED_HOSTS": "mnemo.example.com",
        "MNEMO_DEBUG": "false",
    }
    environment |= overrides
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={k: v for k, v in environment.items() if v},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = deploy_check(tmp_path)
    without_hsts = deploy_check(tmp_path, MNEMO_HSTS_SECONDS="")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNINGS" not in result.stdout + result.stderr
    # The same check does fail on a setting left out.
    assert without_hsts.returncode != 0
    assert "security.W004" in without_hsts.stderr
