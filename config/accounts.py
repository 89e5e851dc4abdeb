"""Accounts settings: sign-in throttling (django-axes), the proxies whose forwarded headers
count, and the mailer for password reset links. Imported by config/settings.py.
"""

from datetime import timedelta

import environ

from config.env import FALSE_WORDS, TRUE_WORDS, env, env_bool, env_int

# django-axes counts failed sign-ins (the pages' /login/ and the admin's); profiles/accounts.py
# (SignInThrottle) holds two locks, each refusing even the right password with a 429 page
# until the failures behind it are MNEMO_LOGIN_LOCKOUT_MINUTES old:
# - per address: MNEMO_LOGIN_FAILURE_LIMIT failures from one client address, at one account
#   or several, lock that address. An owner signing in from another address is not held.
# - per account, for guessing spread over many addresses: MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT
#   failures at one account from anywhere lock it, except from the addresses it signed in
#   from in the last 90 days. Whatever the number of addresses, that bounds the guesses at an
#   account (25 per 15 minutes by default), and it needs at least five addresses to reach,
#   yet keeps no owner out of the networks they use; from a new network they wait, or reset
#   the password by email. No CAPTCHA: Mnemo loads nothing from other sites.
# A successful sign-in clears that account's failures from that address. Unlock someone:
# `manage.py axes_reset_username <name>` or `axes_reset_ip <address>`, or delete their access
# attempts in the admin.
MNEMO_LOGIN_FAILURE_LIMIT = env_int("MNEMO_LOGIN_FAILURE_LIMIT", default=5, minimum=1)
MNEMO_LOGIN_LOCKOUT_MINUTES = env_int("MNEMO_LOGIN_LOCKOUT_MINUTES", default=15, minimum=1)
# Above the address limit, else one address could lock an account everywhere again.
MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT = env_int(
    "MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT",
    default=5 * MNEMO_LOGIN_FAILURE_LIMIT,
    minimum=MNEMO_LOGIN_FAILURE_LIMIT + 1,
)
# A TLS proxy in front (docs/deployment.md, "Running behind TLS") says who the client is,
# whether it used HTTPS and which host it asked for, in X-Forwarded-For/-Proto/-Host. Those headers
# count only on a connection from MNEMO_TRUSTED_PROXIES: addresses or networks
# (comma-separated), by default loopback only, i.e. a proxy on the same host as `make run`;
# a proxy elsewhere (another container, a load balancer) must be listed. From any other
# peer lib/forwarded.py removes them before anything reads them. The client's address is
# then the right-most X-Forwarded-For entry that is not itself a trusted proxy.
MNEMO_BEHIND_PROXY = env_bool("MNEMO_BEHIND_PROXY", default=False)


def _trusted_proxies() -> list[str]:
    import ipaddress

    raw = env.str("MNEMO_TRUSTED_PROXIES", default="").strip()
    if not MNEMO_BEHIND_PROXY:
        if raw:
            raise environ.ImproperlyConfigured(
                "MNEMO_TRUSTED_PROXIES is set but MNEMO_BEHIND_PROXY is not true; "
                "set MNEMO_BEHIND_PROXY=true to trust those proxies."
            )
        return []
    networks = []
    for entry in filter(None, (part.strip() for part in raw.split(","))):
        try:
            networks.append(str(ipaddress.ip_network(entry)))
        except ValueError as error:
            raise environ.ImproperlyConfigured(f"MNEMO_TRUSTED_PROXIES: {error}.") from None
    return networks or ["127.0.0.0/8", "::1/128"]


MNEMO_TRUSTED_PROXIES = _trusted_proxies()
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out sign-in
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = MNEMO_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=MNEMO_LOGIN_LOCKOUT_MINUTES)
# axes' own count is the address lock; the address's failures at an account are among them.
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
# A try while locked out is refused unchecked and not counted, so the lock ends when announced.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_HANDLER = "profiles.accounts.SignInThrottle"  # the account lock; what a sign-in clears
AXES_LOCKOUT_CALLABLE = "profiles.accounts.locked_out"
# The sign-in log (AccessLog) names the addresses an account is known at: keep it.
AXES_DISABLE_ACCESS_LOG = False
# REMOTE_ADDR, which lib/forwarded.py sets from a trusted proxy's X-Forwarded-For (an IPv6
# address as its /64). A callable, because axes' AXES_IPWARE_* settings need django-ipware.
AXES_CLIENT_IP_CALLABLE = "profiles.accounts.client_address"
AXES_VERBOSE = False  # no banner on every process start (it went to manage.py's output)

# Email, for password reset links: EMAIL_URL, e.g. smtp://user:password@mail.example.com:587
# ?tls=true (or ?ssl=true on port 465), as Django's MAILERS (Django 6.1 deprecates the EMAIL_*
# settings). Unset, there is no mailer: nothing is sent and the reset page says so.


def _mailer(name: str) -> dict[str, object]:
    """The URL, read by django-environ, as a MAILERS entry. django-environ leaves ?tls= and
    ?ssl= in its OPTIONS, where no Django setting reads them (mail would go unencrypted), so
    they are read here. Messages never repeat the URL: it holds a password."""
    try:
        config = environ.Env.email_url_config(env.str(name).strip())
    except environ.ImproperlyConfigured as error:
        raise environ.ImproperlyConfigured(f"{name}: {error}.") from None
    for option, value in config.pop("OPTIONS", {}).items():
        if option not in ("TLS", "SSL"):
            raise environ.ImproperlyConfigured(
                f"{name}: unknown option {option.lower()!r}; use ?tls=true or ?ssl=true."
            )
        config[f"EMAIL_USE_{option}"] = value
    for setting in ("EMAIL_USE_TLS", "EMAIL_USE_SSL"):
        flag = str(config.get(setting, False)).strip().lower()
        if flag not in TRUE_WORDS + FALSE_WORDS:
            option = setting.removeprefix("EMAIL_USE_").lower()
            raise environ.ImproperlyConfigured(
                f"{name}: {option}={flag!r} is not a boolean; use true or false."
            )
        config[setting] = flag in TRUE_WORDS
    if config["EMAIL_USE_TLS"] and config["EMAIL_USE_SSL"]:
        raise environ.ImproperlyConfigured(f"{name}: use tls or ssl, not both.")
    backend = str(config["EMAIL_BACKEND"])
    options: dict[str, object] = {}
    if backend == "django.core.mail.backends.smtp.EmailBackend":
        options = {
            "host": config["EMAIL_HOST"] or "localhost",
            "port": config["EMAIL_PORT"],  # None: 25, 587 with tls, 465 with ssl
            "username": config["EMAIL_HOST_USER"],
            "password": config["EMAIL_HOST_PASSWORD"],
            "use_tls": config["EMAIL_USE_TLS"],
            "use_ssl": config["EMAIL_USE_SSL"],
            "timeout": 10,  # seconds: a stuck mail server must not hold a request for long
        }
    elif backend == "django.core.mail.backends.filebased.EmailBackend":
        options = {"file_path": config["EMAIL_FILE_PATH"]}
    return {"BACKEND": backend, "OPTIONS": {k: v for k, v in options.items() if v is not None}}


MAILERS = {"default": _mailer("EMAIL_URL")} if env.str("EMAIL_URL", default="").strip() else {}
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="webmaster@localhost")
