"""lib/credentials.py: what looks like a credential, and what is an ordinary memory.

The fake credentials are built from parts at run time, so this file holds no string a
secret scanner would stop; each has its provider's published shape.
"""

from __future__ import annotations

import base64
import json
import random
import string
import time

import pytest

from lib.credentials import (
    _PASSWORD_NEEDLES,
    _PASSWORD_WORDS,
    _PASSWORD_WORDS_UNSPACED,
    RULES,
    find_credential,
    find_credentials,
    redact,
)

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


def token(length: int, alphabet: str = ALNUM, seed: int = 0) -> str:
    """A fixed random-looking string (the same each run)."""
    rng = random.Random(f"{seed}-{length}-{alphabet}")
    while True:
        text = "".join(rng.choice(alphabet) for _ in range(length))
        if alphabet != ALNUM or (
            any(c.isdigit() for c in text)
            and any(c.islower() for c in text)
            and any(c.isupper() for c in text)
        ):
            return text


def b64url(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


JWT = ".".join(
    [
        b64url({"alg": "HS256", "typ": "JWT"}),
        b64url({"sub": "1234567890", "name": "Alice", "iat": 1516239022}),
        token(43, URLSAFE, seed=7),
    ]
)
PEM = (
    "-----BEGIN {} PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END {} PRIVATE KEY-----"
)
SK = "sk"  # kept apart so no line of this file reads as a key

POSITIVES = [
    # provider keys
    ("openai_api_key", f"My OpenAI key: {SK}-proj-{token(156, URLSAFE, 1)}"),
    ("openai_api_key", f"{SK}-{token(48)}"),
    ("openai_api_key", f"use {SK}-svcacct-{token(64, URLSAFE, 2)} for the bot"),
    ("anthropic_api_key", f"{SK}-ant-api03-{token(93, URLSAFE, 3)}AA"),
    ("aws_access_key_id", "AWS key id AKIA" + "IOSFODNN7EXAMPLE"),
    ("aws_access_key_id", "ASIA" + token(15, string.ascii_uppercase + "234567", 4) + "7"),
    (
        "aws_secret_access_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    ),
    ("aws_secret_access_key", f"AWS Secret Access Key: {token(40, ALNUM + '/+', 5)}"),
    ("github_token", "gh" + f"p_{token(36)}"),
    ("github_token", "gh" + f"o_{token(36, seed=1)}"),
    ("github_token", "gh" + f"u_{token(36, seed=2)}"),
    ("github_token", "gh" + f"s_{token(36, seed=3)}"),
    ("github_token", "gh" + f"r_{token(36, seed=4)}"),
    ("github_token", "github" + f"_pat_11ABCDEFG0{token(72, ALNUM + '_', 5)}"),
    ("gitlab_token", "gl" + f"pat-{token(20, URLSAFE, 6)}"),
    ("slack_token", "xo" + f"xb-123456789012-1234567890123-{token(24)}"),
    ("slack_token", "xo" + f"xp-123456789012-{token(30, seed=8)}"),
    ("slack_webhook", "https://hooks.slack.com/services/T00000000/B00000000/" + token(24)),
    ("stripe_secret_key", SK + f"_live_{token(24, seed=9)}"),
    ("stripe_secret_key", SK + f"_test_{token(24, seed=10)}"),
    ("stripe_secret_key", "rk" + f"_live_{token(24, seed=11)}"),
    ("google_api_key", "AI" + f"za{token(35, URLSAFE, 12)}"),
    ("google_oauth_secret", "GOCSPX" + f"-{token(28, URLSAFE, 13)}"),
    ("twilio_api_key", "SK" + token(32, HEX, 14)),
    ("sendgrid_api_key", "SG" + f".{token(22, URLSAFE, 15)}.{token(43, URLSAFE, 16)}"),
    ("huggingface_token", "hf" + f"_{token(34, string.ascii_letters, 17)}"),
    ("npm_token", "npm" + f"_{token(36, seed=18)}"),
    ("pypi_token", "pypi" + f"-AgEIcHlwaS5vcmc{token(70, URLSAFE, 19)}"),
    ("mnemo_token", "mnemo" + f"_{token(43, URLSAFE, 20)}"),
    ("mnemo_token", "my system token is mnemo" + f"_sys_{token(43, URLSAFE, 21)}"),
    ("jwt", f"session cookie {JWT}"),
    # keys and headers
    ("private_key", PEM.format("RSA", "RSA")),
    ("private_key", PEM.format("EC", "EC")),
    ("private_key", PEM.format("OPENSSH", "OPENSSH")),
    ("private_key", "-----BEGIN PRIVATE KEY-----\nMIIEvQ..."),
    ("private_key", "-----BEGIN ENCRYPTED PRIVATE KEY-----"),
    ("private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
    ("private_key", "PuTTY-User-Key-File-3: ssh-ed25519"),
    ("bearer_token", f"curl -H 'Authorization: Bearer {token(40, seed=22)}'"),
    ("basic_auth", "Authorization: Basic dXNlcjpodW50ZXIy"),
    ("connection_string", "postgres://user:pass@db.example.com:5432/app"),
    ("connection_string", "DATABASE_URL=mysql://root:hunter2@localhost/shop"),
    ("connection_string", "redis://:s3cret@cache:6379/0"),
    ("connection_string", "mongodb+srv://app:Xy7pQ2zz@cluster0.example.net/db"),
    ("connection_string", "clone https://bob:hunter2@git.example.com/repo.git"),
    # passwords, in many languages
    ("password", "password: hunter2"),
    ("password", "Password: MySecret"),
    ("password", "pwd=Tr0ub4dor&3"),
    ("password", "DB_PASSWORD=example-pass"),
    ("password", 'config = {"password": "hunter2"}'),
    ("password", 'password = "s3cr3t!"'),
    ("password", "my password is Tr0ub4dor&3"),
    ("password", "The password for the guest network is GuestNet2024."),
    ("password", "My Gmail password is 'kittens'"),
    ("password", "Wi-Fi password: correcthorse"),
    ("password", "Passwort: geheim"),
    ("password", "password: hunter2 please"),
    ("password", "Mein Passwort ist Sommer2024!"),
    ("password", "Das Kennwort lautet Geheim123"),
    ("password", "Le mot de passe est Bonjour123"),
    ("password", "mot de passe : soleil42"),
    ("password", "Mi contraseña es gato1234"),
    ("password", "contraseña: PerroVerde"),
    ("password", "Minha senha é abc12345"),
    ("password", "La password è Roma2024"),
    ("password", "Het wachtwoord is Fiets123"),
    ("password", "Moje hasło: Kot12345"),
    ("password", "Lösenord: Sommar2024"),
    ("password", "пароль: Qwerty123"),
    ("password", "Мой пароль — Zima2024"),
    ("password", "我的密码是abc12345，记住它"),
    ("password", "密码：hunter2"),
    ("password", "パスワードは abc12345 です"),
    ("password", "パスワード：Sakura2024"),
    ("password", "비밀번호는 qwer1234 입니다"),
    ("password", "Şifre: Kedi2024"),
    # labelled secrets
    ("secret", "api_key = 3f786850e387550fdab836ed7e6dc881de23001b"),
    ("secret", "client_secret: 8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d"),
    ("secret", f"The API token is {token(32, seed=23)}"),
    # card numbers that pass Luhn
    ("card_number", "Card: 4111 1111 1111 1111, exp 12/29"),
    ("card_number", "4111-1111-1111-1111"),
    ("card_number", "Mastercard 5555555555554444"),
    ("card_number", "Amex 3782 822463 10005"),
    ("card_number", "378282246310005"),
    ("card_number", "Discover 6011111111111117"),
    ("card_number", "JCB 3530111333300000"),
    ("card_number", "Diners 30569309025904"),
    ("card_number", "Meine Kreditkarte: 4012888888881881"),
]

NEGATIVES = [
    # ordinary memories, in several languages
    "Prefers oat milk in coffee",
    "Always include a TL;DR at the top of reports",
    "Trinkt morgens Hafermilch und mag kurze Antworten",
    "Préfère les réunions après 10 h",
    "Prefiere respuestas breves en español",
    "Gosta de café sem açúcar",
    "Predilige le riunioni al mattino",
    "Предпочитает краткие ответы",
    "喜欢喝绿茶，不喜欢开早会",
    "朝の会議は苦手です",
    "짧은 답변을 선호합니다",
    "يفضل الاجتماعات الصباحية",
    "# Ideas\n- a weekly digest\n- a dark mode\n",
    # passwords talked about, not given
    "My password manager is 1Password",
    "Moved all my passwords to 1Password",
    "The Wi-Fi password is on the fridge",
    "Reset the password every 90 days",
    "The password is at least 12 characters long",
    "The password was changed last week",
    "Uses a password-protected PDF for invoices",
    "Forgot the password again; use the reset link",
    "Passwort vergessen? Den Passwort-Manager nutzen",
    "Le mot de passe doit contenir 12 caractères",
    "La contraseña se cambia cada mes",
    "A senha do Wi-Fi está na geladeira",
    "Пароль от Wi-Fi на холодильнике",
    "密码在冰箱上",
    "パスワードを忘れた",
    "password: <your password>",
    "password: ********",
    "password: required",
    # code that names a password without giving one
    "def login(user, password):\n    return check(user, password)",
    "password = getpass.getpass()",
    'password = os.environ["DB_PASSWORD"]',
    'if not password:\n    raise ValueError("password is required")',
    "user.set_password(password)",
    'payload = {"username": username, "password": password}',
    "password: str | None = None",
    "password = models.CharField(max_length=128)",
    "new_password = old_password",
    "password=new_password,",
    "PASSWORD_MIN_LENGTH = 12",
    "AUTH_PASSWORD_VALIDATORS = [",
    "password: ${{ secrets.DB_PASSWORD }}",
    ":param password: When `True`, display asterisks",
    "password: (bool, optional): Hide the input",
    "include_password: bool, default True",
    "passwd:gecos",
    "The password of the connection. See :pq:`PQpass()`.",
    # identifiers that are not credentials
    "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "Ticket 123e4567-e89b-12d3-a456-426614174000",
    "ISBN 978-3-16-148410-0",
    "ISBN 9780306406157",
    "Amazon order 112-4567890-1234567",
    "Call +1 (415) 555-2671 or +44 20 7946 0958",
    "Mobile 0049 151 23456789",
    "Born 1990-01-15; moved 15.01.2024",
    "Invoice 4111 1111 1111 1112",  # fails Luhn
    "Reference 1234 5678 9012 3456 7",
    "IBAN DE89 3704 0044 0532 0130 00",
    "Timestamp 1700000000000",
    "qq3936677670287331zz",
    "seed 4266599d12bfcfb815213303432341c06b4349f5455890446578877bb322e222",
    "AWS account 123456789012, arn:aws:iam::123456789012:role/reader",
    "Stripe publishable key pk_live_" + "51H8sZ2eZvKYlo2C0aBcDeFgH",
    "Token budget: 2000 tokens; max_tokens=4000",
    "secret: the surprise party is on Friday",
    "Secret Santa budget: 20 EUR",
    "Bearer of good news; bearer token auth is used for the API",
    "Uses scikit-learn and task-management-for-the-team-weekly-notes",
    "https://example.com/path?x=1 and postgres://localhost:5432/app",
    "ssh://git@github.com/org/repo.git and https://user@example.com",
    "postgres://user:${DB_PASSWORD}@db/app",
    "Version 1.2.3.4 shipped",
    "mnemo_token_budget = 2000",
]


@pytest.mark.parametrize(("kind", "text"), POSITIVES)
def test_each_kind_is_found(kind, text):
    found = find_credential(text)
    assert found is not None, text
    assert found.kind == kind
    assert found.label.startswith(("a ", "an "))
    assert 0 <= found.start < found.end <= len(text)


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_memories_are_not_credentials(text):
    assert find_credential(text) is None
    assert find_credentials(text) == []


def test_every_rule_has_a_positive():
    assert {rule.kind for rule in RULES} == {kind for kind, _ in POSITIVES}


def test_every_word_for_a_password_starts_with_a_needle():
    """The password rule is tried only where a needle is: a word no needle starts would
    never be found."""
    words = f"{_PASSWORD_WORDS}|{_PASSWORD_WORDS_UNSPACED}".split("|")
    assert [word for word in words if not word.lower().startswith(_PASSWORD_NEEDLES)] == []


def test_password_span_is_the_value_without_quotes_or_full_stop():
    text = "The password for the guest network is 'GuestNet2024'."
    found = find_credential(text)
    assert text[found.start : found.end] == "GuestNet2024"


def test_find_credentials_lists_each_once_in_order():
    github = "gh" + f"p_{token(36)}"
    text = f"card 4111 1111 1111 1111 then {github} then password: hunter2"
    found = find_credentials(text)
    assert [(c.kind, text[c.start : c.end]) for c in found] == [
        ("card_number", "4111 1111 1111 1111"),
        ("github_token", github),
        ("password", "hunter2"),
    ]


def test_redact_names_what_was_removed():
    github = "gh" + f"p_{token(36)}"
    assert redact(f"use {github} and password: hunter2.") == (
        "use [removed: a GitHub token] and password: [removed: a password]."
    )
    assert redact("Prefers oat milk") == "Prefers oat milk"


def _per_call_us(text: str, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        find_credential(text)
    return (time.perf_counter() - start) / calls * 1e6


def test_a_check_is_cheap():
    """Loose bounds (a shared 2-core machine): the write path's budget is a few ms; the
    measured numbers are in bench/README.md."""
    typical = "Prefers bullet points in reports, and a TL;DR at the top (since 2024-05-01)"
    long_value = ("Notes from the weekly review 2024-05-01: " + "the team chose PostgreSQL. ") * 30
    assert _per_call_us(typical, 2000) < 200
    assert _per_call_us(long_value[:2000], 500) < 2000
