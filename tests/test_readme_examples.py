"""The README's examples run as shown, on the demo data: the token command, the curl calls,
the Python client and the MCP SDK snippet are cut from README.md and run, unchanged but for
the server's address and the token, against the web application (config.asgi, /mcp
included) on a free port, with the demo account `make run` seeds (seed_demo).

What the README shows after `# →` is what each must give: for a curl call, a JSON object
the answer contains (the README shortens answers); for a Python line, what it prints.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.mcp_bridge.test_mcp import mcp_url, stdio_parameters  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_URL = "http://127.0.0.1:8000"
README_TOKEN = "mnemo_…"
SHOWN = re.compile(r"#\s*→\s*(.+?)\s*$")
MARK = "@@README-EXAMPLE@@"
TIMEOUT_S = 120


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)


def the_block(language: str, marker: str) -> str:
    """The one README block in `language` holding `marker`."""
    found = [code for lang, code in code_blocks(README.read_text()) if lang == language]
    found = [code for code in found if marker in code]
    assert len(found) == 1, f"README.md should have one {language} block with {marker!r}"
    return found[0]


def contains(answer: object, shown: object) -> bool:
    """Whether `answer` holds everything `shown` says (objects: those keys, recursively)."""
    if isinstance(shown, dict):
        return isinstance(answer, dict) and all(
            key in answer and contains(answer[key], value) for key, value in shown.items()
        )
    return answer == shown


def shell_environment() -> dict[str, str]:
    """manage.py in a subprocess, on this test's database (as tests/mcp_bridge does)."""
    return {**stdio_parameters(None).env, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def run_shell(script: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["/bin/bash", "-e", "-o", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{script}\n--- stderr:\n{done.stderr[-3000:]}"
    return done.stdout


def run_python(code: str, env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{code}\n--- stderr:\n{done.stderr[-3000:]}"
    return done.stdout.splitlines()


def printed_as_shown(code: str) -> list[str]:
    """What the README says a Python block prints: the `# →` of each print line, in order."""
    return [m[1] for line in code.splitlines() if "print(" in line and (m := SHOWN.search(line))]


@pytest.fixture
def demo(settings) -> None:
    settings.EMBEDDED = True  # seed_demo makes the account in embedded mode only
    said = io.StringIO()
    call_command("seed_demo", stdout=said)
    assert "Demo account 'demo' ready" in said.getvalue()


@pytest.fixture
def base_url(mcp_url: str) -> str:  # noqa: F811 - the fixture imported above
    return mcp_url.removesuffix("/mcp")


@pytest.fixture
def readme_token(demo) -> str:
    """The README's token command, run as shown (with this checkout's interpreter)."""
    block = the_block("sh", "create_agent_token")
    assert block.startswith("TOKEN=$(.tools/bin/uv run python manage.py create_agent_token ")
    script = block.replace(".tools/bin/uv run python", sys.executable) + 'printf %s "$TOKEN"'
    token = run_shell(script, shell_environment()).strip()
    assert token.startswith("mnemo_")
    return token


def test_the_curl_examples_answer_as_shown(base_url, readme_token):
    block = the_block("sh", "curl -s -X POST")
    script, expected, command = [], [], []
    for line in block.splitlines():
        if shown := SHOWN.match(line.strip()):
            expected.append(json.loads(shown[1]))
            script += [*command, f"echo; echo {MARK}"]
            command = []
        else:
            command.append(line.replace(README_URL, base_url))
    assert len(expected) >= 2, "each curl example is followed by its answer"
    output = run_shell("\n".join(script), {**shell_environment(), "TOKEN": readme_token})
    answers = [json.loads(chunk) for chunk in output.split(MARK)[:-1]]
    assert len(answers) == len(expected)
    for answer, shown in zip(answers, expected, strict=True):
        assert contains(answer, shown), f"README shows {shown}, the API answered {answer}"


def test_the_python_client_example_prints_what_it_shows(base_url, readme_token):
    block = the_block("python", "from mnemo_client import MnemoClient")
    code = block.replace(README_URL, base_url).replace(README_TOKEN, readme_token)
    assert readme_token in code, "the example takes the token where the README says"
    env = {**shell_environment(), "PYTHONPATH": str(ROOT / "clients" / "python" / "src")}
    shown = printed_as_shown(block)
    assert len(shown) == 3
    assert run_python(code, env) == shown


def test_the_mcp_sdk_example_prints_what_it_shows(base_url, readme_token):
    block = the_block("python", "streamable_http_client")
    code = block.replace(README_URL, base_url).replace(README_TOKEN, readme_token)
    assert readme_token in code
    assert f"{base_url}/mcp" in code
    shown = printed_as_shown(block)
    assert len(shown) == 2
    assert run_python(code, shell_environment()) == shown


def test_the_mcp_sdk_example_says_why_a_wrong_token_is_refused(base_url, demo):
    """The README says a wrong token fails at once with the server's reason."""
    assert "fails at once with the server's reason (`Unknown token.`)" in README.read_text()
    block = the_block("python", "streamable_http_client")
    code = block.replace(README_URL, base_url).replace(README_TOKEN, "mnemo_" + "x" * 40)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=shell_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode != 0
    assert "Unknown token." in done.stderr


def test_the_checks_fail_on_a_changed_answer():
    assert contains({"status": "created", "memory": {"key": "a", "id": 1}}, {"status": "created"})
    assert not contains({"status": "duplicate"}, {"status": "created"})
    assert not contains({"memory": {"key": "b"}}, {"memory": {"key": "a"}})
    assert printed_as_shown("print(1)  # → 1\nx = 2  # → not printed\nprint(x)  # → 2\n") == [
        "1",
        "2",
    ]
