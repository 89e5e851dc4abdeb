"""Does a text hold a credential? The check behind "secrets never become memories".

`find_credential(text)` answers the first credential found (its kind, a label to show and
where it is) or None; `find_credentials` all of them; `redact` blanks them out of a text
that is kept (an import's report, a capture's outcome).

A small pattern set kept here, not a scanner library: Yelp's detect-secrets (its last
release is from 2024) scans files line by line under global settings, knows neither the
newer providers (Anthropic, OpenAI project keys, Hugging Face, Mnemo's own tokens) nor
card numbers or passwords written in another language than English, and its entropy
plugins flag every git commit hash; measured on bench/README.md's table it cost about
100x more per check. Each rule here is a regex guarded by substrings that must be in
the text before the regex runs, so a value with none of them costs a few substring
searches (bench/README.md: "Credential check").

What counts, and why some look-alikes do not:
- Provider keys by their published prefixes and lengths (sk-…, AKIA…, ghp_…, …).
- Private keys (a PEM "BEGIN … PRIVATE KEY" line, PuTTY key files), JSON Web Tokens, a
  Bearer or Basic Authorization value, a URL with a password in it (postgres://u:p@h).
- A password written after its word in one of many languages ("password:", "Passwort
  ist", "mot de passe :", "contraseña es", "пароль:", "密码是", "パスワードは", …): after
  ":" or "=" any value that is not a placeholder or code; after "is" (and its kin) only
  one that looks like a password (a digit, a symbol or mixed case), so "the password is
  on the fridge" stays a memory. A variable named password with no value, and
  "1Password", are not credentials.
- A secret, token or API key after its label (`api_key = …`, "token: …"): at least 20
  characters of a token's alphabet with letters and digits.
- Card numbers: 13 to 19 digits (spaces or dashes grouped as cards print them) with a card
  network's prefix and length, passing the Luhn check. Phone numbers, dates, ISBNs and
  order ids fail one of the three.
- Not credentials: hashes (a 40-character git commit id, a SHA-256), UUIDs and other
  long random-looking strings without a label. They name things rather than open them,
  and flagging high-entropy strings would refuse every commit id an agent notes.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from lib.errors import SecretRefused


@dataclass(frozen=True)
class Credential:
    """A credential found in a text: `kind` for machines, `label` for people ("an
    OpenAI API key"), and where the secret part is (`start`, `end`)."""

    kind: str
    label: str
    start: int
    end: int


@dataclass(frozen=True)
class _Rule:
    kind: str
    label: str
    pattern: re.Pattern[str]
    # Where to look: the regex is tried only where one of these is in the text (in the
    # lower-cased text when `lowered`), found by str.find at C speed, so a value without
    # any costs a few substring searches. `anchored`: a match starts at a needle, so the
    # regex is matched there only; otherwise it searches the text when a needle is in it.
    needles: tuple[str, ...]
    lowered: bool = False
    check: Callable[[re.Match[str]], bool] | None = None
    anchored: bool = True
    # A cheaper question first, for a whole family of rules at once (see _open_gates).
    gate: str = ""
    ascii_needles: tuple[str, ...] = field(init=False)  # the needles an ASCII text can hold

    def __post_init__(self) -> None:
        ascii_needles = tuple(needle for needle in self.needles if needle.isascii())
        object.__setattr__(self, "ascii_needles", ascii_needles)


# Not inside a longer word or token.
_START = r"(?<![A-Za-z0-9_-])"
_SYMBOLS = frozenset("!\"#$%&'()*+,./:;<=>?@[\\]^_`{|}~")


def _mixed(secret: str) -> bool:
    """Random-looking: a digit, a lower-case and an upper-case letter."""
    return (
        any(c.isdigit() for c in secret)
        and any(c.islower() for c in secret)
        and any(c.isupper() for c in secret)
    )


def _secret(match: re.Match[str]) -> str:
    return match.group("secret") if "secret" in match.re.groupindex else match.group(0)


def _is_mixed(match: re.Match[str]) -> bool:
    return _mixed(_secret(match))


def _has_digit_and_letter(match: re.Match[str]) -> bool:
    secret = _secret(match)
    return any(c.isdigit() for c in secret) and any(c.isalpha() for c in secret)


def _has_digit(match: re.Match[str]) -> bool:
    return any(c.isdigit() for c in _secret(match))


# --- card numbers -------------------------------------------------------------------------


_NOT_BEFORE_CARD = frozenset(string.ascii_letters + "_+.,")


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card_network(digits: str) -> bool:
    """Whether a card network issues numbers with this prefix and length."""
    n = len(digits)
    two, four = int(digits[:2]), int(digits[:4])
    return (
        (digits[0] == "4" and n in (13, 16, 19))  # Visa
        or ((51 <= two <= 55 or 2221 <= four <= 2720) and n == 16)  # Mastercard
        or (two in (34, 37) and n == 15)  # American Express
        or ((four == 6011 or two == 65 or 644 <= int(digits[:3]) <= 649) and n >= 16)  # Discover
        or (3528 <= four <= 3589 and n >= 16)  # JCB
        or ((300 <= int(digits[:3]) <= 305 or two in (36, 38, 39)) and n >= 14)  # Diners
        or (two == 62 and n >= 16)  # UnionPay
        or ((two == 50 or 56 <= two <= 69) and n >= 13)  # Maestro
        or (2200 <= four <= 2204 and n >= 16)  # Mir
    )


def _is_card(match: re.Match[str]) -> bool:
    text, whole, start, end = match.group("secret"), match.string, match.start(), match.end()
    before, after = whole[start - 1 : start] if start else "", whole[end : end + 2]
    # Not part of a word, a decimal number or a phone number ("+49…").
    if before in _NOT_BEFORE_CARD:
        return False
    if after[:1].isascii() and (after[:1].isalpha() or after[:1] == "_"):
        return False
    if after[:1] in (".", ",") and after[1:2].isdigit():
        return False
    groups = re.split(r"[ -]", text)
    if len(groups) > 1:
        separators = set(re.findall(r"[ -]", text))
        # As cards print them: one kind of separator, groups of four (Amex and Diners 4-6-5
        # and 4-6-4), so "978-0-306-40615-7" (an ISBN) or "112-4567890-1234567" are not.
        if len(separators) > 1 or len(groups[0]) != 4:
            return False
        if any(not 4 <= len(group) <= 6 for group in groups[1:-1]) or len(groups[-1]) > 6:
            return False
    digits = "".join(groups)
    return 13 <= len(digits) <= 19 and _card_network(digits) and _luhn(digits)


# --- passwords and labelled secrets -------------------------------------------------------

# The word for a password, in languages written with spaces between words (words, not
# passwords, hence the noqa)...
_PASSWORD_WORDS = (
    "password|passwd|passphrase|passcode|pwd|pw"  # English  # noqa: S105
    "|passwort|kennwort"  # German
    "|mot de passe|mdp"  # French
    "|contraseña|contrasena|clave de acceso"  # Spanish
    "|senha|palavra-passe"  # Portuguese
    "|parola d'ordine|parola|parolă"  # Italian, Turkish, Romanian
    "|wachtwoord"  # Dutch
    "|hasło|haslo|heslo"  # Polish, Czech, Slovak
    "|lösenord|losenord|passord|adgangskode|salasana"  # Swedish, Norwegian, Danish, Finnish
    "|jelszó|jelszo|şifre|sifre|şifrem|sifrem|κωδικός|пароль|парола"  # Hu, Tr, El, Ru/Uk, Bg
    "|סיסמה|סיסמא|كلمة المرور|كلمة السر|पासवर्ड|mật khẩu|kata sandi|kata laluan"
)
# ... and in those written without (no word boundary to look for).
_PASSWORD_WORDS_UNSPACED = "密码|密碼|口令|パスワード|暗証番号|비밀번호|암호|รหัสผ่าน"  # noqa: S105
# "the password for the guest network is …": a short clause naming what it opens.
# Spaces within a line: a value is never looked for on the next line.
_SP = r"[^\S\r\n]"
_FOR = (
    rf"(?:{_SP}+(?:for|to|of|on|at|für|zum|zur|von|de|du|des|pour|para|del|da|do|per|voor"
    rf"|van|för|til|dla|для|от|на)(?:{_SP}+[^\s:=：]{{0,29}}[^\s:=：.,;!?]){{1,3}}?)?"
)
_ASSIGN = rf"[\"'»”]?{_SP}*(?::=|=>|->|[:=：]|{_SP}[-–—]){_SP}*"
_VERB = (
    rf"{_SP}+(?:is|was|ist|lautet|war|est|était|es|era|é|è|jest|je|är|er|olan|это){_SP}+"
    rf"|{_SP}*(?:是|为|為|は|が|는|은|이|가){_SP}*"
)
# The value: printable ASCII up to a space (or a CJK character that ends the sentence).
_VALUE = r"(?P<secret>[!-~]{3,128})"

_PASSWORD = re.compile(
    rf"(?:(?<![^\W_])(?:{_PASSWORD_WORDS})(?![^\W_])|(?:{_PASSWORD_WORDS_UNSPACED}))"
    rf"{_FOR}(?:(?P<assign>{_ASSIGN})|(?:{_VERB})){_VALUE}",
    re.IGNORECASE,
)


# Where a word for a password can start (each word starts with one: a test checks it).
_PASSWORD_NEEDLES = (
    *("pass", "pw", "kennwort", "mot de passe", "mdp", "contrase", "clave de acceso"),
    *("senha", "palavra-passe", "parol", "wachtwoord", "hasl", "hasło", "heslo", "lösenord"),
    *("losenord", "adgangskode", "salasana", "jelsz", "şifre", "sifre", "κωδικός", "пароль"),
    *("парола", "סיסמ", "كلمة", "पासवर्ड", "mật khẩu", "kata sandi", "kata laluan"),
    *_PASSWORD_WORDS_UNSPACED.split("|"),
)

_SECRET_NEEDLES = ("api", "secret", "client", "access", "auth", "refresh", "private", "token")
_SECRET_WORDS = (  # the labels a secret comes after
    r"api[_ -]?key|apikey|api[_ -]?token|api[_ -]?secret|secret[_ -]?key|client[_ -]?secret"  # noqa: S105
    r"|access[_ -]?token|auth[_ -]?token|refresh[_ -]?token|access[_ -]?key|private[_ -]?key"
    r"|secret|token"
)
_LABELLED_SECRET = re.compile(
    rf"(?<![^\W_])(?:{_SECRET_WORDS})(?![^\W_])"
    rf"(?:{_ASSIGN}|{_SP}+(?:is|was){_SP}+)[\"'`]?(?P<secret>[A-Za-z0-9._~+/=-]{{20,512}})",
    re.IGNORECASE,
)

# Values that stand for a password without being one: placeholders, types, words.
_NOT_A_PASSWORD = frozenset(
    [
        *("none", "null", "nil", "empty", "blank", "required", "optional", "unknown", "n/a"),
        *("redacted", "hidden", "removed", "changeme", "change-me", "same", "reset", "see"),
        *("below", "above", "prompt", "input", "ask", "stored", "saved", "set", "unset"),
        *("true", "false", "yes", "no", "str", "string", "int", "bytes", "text", "varchar"),
        *("char", "bool", "boolean", "any", "object", "secretstr", "secretbytes", "undefined"),
        *("default", "must", "should", "needs", "will", "the", "this", "that", "your", "their"),
        *("protected", "manager", "managers", "field", "fields", "hash", "hashed", "length"),
        *("policy", "expired", "keins", "aucun", "ninguna", "nenhuma", "нет"),
        *_PASSWORD_WORDS.split("|"),
    ]
)
_PLACEHOLDER = re.compile(r"^(?:[<{$%\[(]|\*+$|[xX]+$|\.+$|…|•+$|_+$|-+$)")
# An identifier or an expression in code: `password = os.environ[...]`, `getpass()`,
# `user.password`, `new_password`, `DB_PASSWORD`.
_CODE = re.compile(
    r"^(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z_][\w.]*[(\[].*|[a-z]+(?:_[a-z]+)+"
    r"|[A-Z]+(?:_[A-Z]+)+)[,;:)]*$"
)
_QUOTES = "\"'`“”‘’«»"
_TRAILING = ".,;:!?)]}" + _QUOTES


def _clean_value(raw: str) -> tuple[str, bool]:
    """The value without its quotes and the sentence's end punctuation; whether quoted."""
    quoted = raw[0] in _QUOTES
    value = raw[1:] if quoted else raw
    if quoted and raw[0] in value:  # a closing quote: the value ends there
        value = value[: value.index(raw[0])]
    return value.rstrip(_TRAILING), quoted


def _is_password(match: re.Match[str]) -> bool:
    value, quoted = _clean_value(match.group("secret"))
    if len(value) < 4 or value.lower() in _NOT_A_PASSWORD or _PLACEHOLDER.match(value):
        return False
    if quoted:
        return True
    if _CODE.match(value):
        return False
    assign = match.group("assign")
    # "password: hunter" and "pwd=secret" give a value; so does a word after a spaced
    # colon when nothing follows it ("Passwort: geheim"). A word that a sentence goes on
    # from (":param password: When …"), "passwd:gecos" and whatever follows "is" and its
    # kin count only when they look made up.
    spaced = assign is not None and (assign.strip() not in (":", "：") or assign[-1].isspace())
    if spaced and (not value.isalpha() or not _SENTENCE_GOES_ON.match(match.string, match.end())):
        return True
    return (
        any(c.isdigit() for c in value)
        or any(c in _SYMBOLS for c in value)
        or (any(c.isupper() for c in value[1:]) and any(c.islower() for c in value))
    )


# After a word: more words of the sentence.
_SENTENCE_GOES_ON = re.compile(rf"{_SP}+\S")


def _is_labelled_secret(match: re.Match[str]) -> bool:
    value = match.group("secret").rstrip(_TRAILING)
    return (
        len(value) >= 20
        and not _PLACEHOLDER.match(value)
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and "://" not in value
    )


def _password_span(match: re.Match[str]) -> tuple[int, int]:
    start = match.start("secret")
    raw = match.group("secret")
    value, quoted = _clean_value(raw)
    start += 1 if quoted else 0
    return start, start + len(value)


# --- the rules, most specific first -------------------------------------------------------

# Gates: a token (every provider key, a JWT, a bearer token, a labelled secret) is a run of
# at least 20 characters of a token's alphabet, which prose and code rarely have; a card
# number is at least 13 digits once spaces and dashes are dropped. One bytes.translate
# answers each for all the rules behind it ("" is no gate).
LONG_RUN = "long_run"
CARD_DIGITS = "card_digits"
_TOKEN_BYTES = bytes(
    ord("a") if chr(byte) in string.ascii_letters + string.digits + "_.+/=-" else ord(" ")
    for byte in range(256)
)
_DIGIT_BYTES = bytes(ord("0") if chr(byte) in string.digits else ord(".") for byte in range(256))


def _open_gates(text: str) -> dict[str, bool]:
    raw = text.encode("utf-8", "surrogatepass")
    return {
        "": True,
        LONG_RUN: b"a" * 20 in raw.translate(_TOKEN_BYTES),
        CARD_DIGITS: b"0" * 13 in raw.translate(_DIGIT_BYTES, b" -"),
    }


def _rule(
    kind: str,
    label: str,
    pattern: str,
    needles: tuple[str, ...],
    *,
    check: Callable[[re.Match[str]], bool] | None = None,
    lowered: bool = False,
    anchored: bool = True,
    gate: str = LONG_RUN,
) -> _Rule:
    flags = re.IGNORECASE if lowered else 0
    compiled = re.compile(pattern, flags)
    return _Rule(kind, label, compiled, needles, lowered, check, anchored, gate)


RULES: tuple[_Rule, ...] = (
    _rule(
        "private_key",
        "a private key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d+:",
        ("PRIVATE KEY", "PuTTY-User-Key-File"),
        anchored=False,
        gate="",
    ),
    _rule(
        "anthropic_api_key",
        "an Anthropic API key",
        _START + r"sk-ant-[a-z0-9]{2,12}-[A-Za-z0-9_-]{32,}",
        ("sk-ant-",),
    ),
    _rule(
        "openai_api_key",
        "an OpenAI API key",
        _START + r"sk-(?!ant-)(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{32,}",
        ("sk-",),
        check=_is_mixed,
    ),
    _rule(
        "aws_access_key_id",
        "an AWS access key ID",
        r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])",
        ("AKIA", "ASIA"),
        check=_has_digit,
    ),
    _rule(
        "aws_secret_access_key",
        "an AWS secret access key",
        r"aws.{0,20}?secret.{0,20}?key[\"'\s:=>]{1,10}(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ("aws",),
        lowered=True,
        check=_is_mixed,
    ),
    _rule(
        "github_token",
        "a GitHub token",
        _START + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{40,255})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _rule(
        "gitlab_token",
        "a GitLab token",
        _START + r"gl(?:pat|dt|rt|ptt|oas|cbt)-[A-Za-z0-9_-]{20,}",
        ("glpat-", "gldt-", "glrt-", "glptt-", "gloas-", "glcbt-"),
    ),
    _rule(
        "slack_token",
        "a Slack token",
        _START + r"(?:xox[abposer]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})",
        ("xox", "xapp-"),
        check=_has_digit,
    ),
    _rule(
        "slack_webhook",
        "a Slack webhook URL",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}",
        ("hooks.slack.com",),
        anchored=False,
    ),
    _rule(
        "stripe_secret_key",
        "a Stripe secret key",
        _START + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,}",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
    ),
    _rule(
        "google_api_key",
        "a Google API key",
        _START + r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",
        ("AIza",),
    ),
    _rule(
        "google_oauth_secret",
        "a Google OAuth secret",
        _START + r"(?:GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[A-Za-z0-9_-]{30,})",
        ("GOCSPX-", "ya29."),
    ),
    _rule(
        "twilio_api_key",
        "a Twilio API key",
        r"(?<![A-Za-z0-9])SK[0-9a-f]{32}(?![0-9a-f])",
        ("SK",),
        check=_has_digit_and_letter,
    ),
    _rule(
        "sendgrid_api_key",
        "a SendGrid API key",
        _START + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        ("SG.",),
    ),
    _rule(
        "huggingface_token",
        "a Hugging Face token",
        _START + r"(?:hf_|api_org_)[A-Za-z0-9]{30,}",
        ("hf_", "api_org_"),
        check=lambda match: any(c.isupper() for c in match.group(0)[3:]),
    ),
    _rule("npm_token", "an npm token", _START + r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", ("npm_",)),
    _rule("pypi_token", "a PyPI token", _START + r"pypi-AgE[A-Za-z0-9_-]{50,}", ("pypi-AgE",)),
    _rule(
        "mnemo_token",
        "a Mnemo API token",
        # profiles/services.py: "mnemo_" or "mnemo_sys_", then secrets.token_urlsafe(32).
        _START + r"mnemo_(?:sys_)?[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])",
        ("mnemo_",),
        check=lambda match: _mixed(match.group(0)[6:]),
    ),
    _rule(
        "jwt",
        "a JSON Web Token",
        _START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}",
        ("eyJ",),
    ),
    _rule(
        "bearer_token",
        "a bearer token",
        r"(?<![^\W_])bearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{20,})",
        ("bearer",),
        lowered=True,
        check=_has_digit_and_letter,
    ),
    _rule(
        "basic_auth",
        "an HTTP Basic credential",
        r"authorization[\"']?\s*[:=]\s*[\"']?basic\s+(?P<secret>[A-Za-z0-9+/=]{8,})",
        ("authorization",),
        lowered=True,
        gate="",
    ),
    _rule(
        "connection_string",
        "a connection string with a password",
        # scheme://user:password@host; the scheme does not matter.
        r"://[^\s:/@?#]*:(?P<secret>[^\s@/?#]+)@[^\s/?#@]",
        ("://",),
        check=lambda match: not _PLACEHOLDER.match(match.group("secret")),
        gate="",
    ),
    _Rule("password", "a password", _PASSWORD, _PASSWORD_NEEDLES, True, _is_password),
    _Rule(
        "secret",
        "a secret key or token",
        _LABELLED_SECRET,
        _SECRET_NEEDLES,
        lowered=True,
        check=_is_labelled_secret,
        gate=LONG_RUN,
    ),
    _rule(
        "card_number",
        "a payment card number",
        # Every run of digits (with single spaces or dashes) long enough to be one.
        r"(?P<secret>[0-9](?:[ -]?[0-9]){12,})",
        ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9"),
        check=_is_card,
        anchored=False,
        gate=CARD_DIGITS,
    ),
)


def _scan(text: str) -> Iterator[Credential]:
    """The credentials each rule finds, rule after rule (the most specific first)."""
    lowered, ascii_text, gates = text.lower(), text.isascii(), _open_gates(text)
    for rule in RULES:
        if not gates[rule.gate]:
            continue
        haystack = lowered if rule.lowered else text
        needles = rule.ascii_needles if ascii_text else rule.needles
        if not rule.anchored or len(haystack) != len(text):  # lower() changed the length
            if any(needle in haystack for needle in needles):
                for match in rule.pattern.finditer(text):
                    if _passes(rule, match):
                        yield Credential(rule.kind, rule.label, *_span(rule, match))
            continue
        end = 0
        for start in _occurrences(haystack, needles):
            if start < end:  # inside the previous match
                continue
            match = rule.pattern.match(text, start)
            if match is not None and _passes(rule, match):
                end = match.end()
                yield Credential(rule.kind, rule.label, *_span(rule, match))


def _passes(rule: _Rule, match: re.Match[str]) -> bool:
    return rule.check is None or rule.check(match)


def _span(rule: _Rule, match: re.Match[str]) -> tuple[int, int]:
    """Where the secret itself is: a password's value without its quotes, the part after a
    label, or the whole match."""
    if rule.kind == "password":
        return _password_span(match)
    if "secret" in rule.pattern.groupindex:
        return match.span("secret")
    return match.span()


def _occurrences(haystack: str, needles: tuple[str, ...]) -> list[int]:
    """Where the needles are in the haystack, in order."""
    positions: list[int] = []
    for needle in needles:
        position = haystack.find(needle)
        while position != -1:
            positions.append(position)
            position = haystack.find(needle, position + 1)
    return sorted(positions) if len(positions) > 1 else positions


def find_credentials(text: str) -> list[Credential]:
    """Every credential in the text, in order, none overlapping another."""
    found: list[Credential] = []
    for credential in _scan(text):
        if not any(c.start < credential.end and credential.start < c.end for c in found):
            found.append(credential)
    return sorted(found, key=lambda credential: credential.start)


def find_credential(text: str) -> Credential | None:
    """The first credential the rules find in the text (the most specific kind), or None."""
    return next(_scan(text), None)


def redact(text: str) -> str:
    """The text with each credential replaced by what it was: "[removed: a GitHub token]"."""
    for credential in reversed(find_credentials(text)):
        text = f"{text[: credential.start]}[removed: {credential.label}]{text[credential.end :]}"
    return text


def refuse_credentials(text: object, *, field: str, where: str = "as memories") -> None:
    """SecretRefused naming the first credential in `text` (a str, or a list of them, each
    checked alone: two tags never make one card number). Anything else passes: the
    caller's own checks refuse what is not text."""
    for item in text if isinstance(text, list | tuple) else (text,):
        if isinstance(item, str) and (found := find_credential(item)) is not None:
            raise SecretRefused(kind=found.kind, label=found.label, field=field, where=where)


def saved_warning(credential: Credential) -> str:
    """What a page says after the user saved a credential (the user may; agents may not)."""
    return f"This looks like {credential.label}: your agents will read it."
