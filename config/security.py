"""Public deployment settings: HTTPS behind a proxy, security headers, the Content-Security-
Policy, error pages. Imported by config/settings.py.
"""

from config.accounts import MNEMO_BEHIND_PROXY
from config.env import env_bool, env_int

# Behind a TLS-terminating proxy (MNEMO_BEHIND_PROXY, read in config/accounts.py) a
# request is HTTPS when the proxy's X-Forwarded-Proto says so, and its host name is the
# proxy's X-Forwarded-Host (still checked against ALLOWED_HOSTS). The proxy must set both
# headers itself, replacing whatever the client sent; from a peer not in
# MNEMO_TRUSTED_PROXIES they are removed first (lib/forwarded.py).
if MNEMO_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = True
# Redirect plain HTTP to HTTPS. Behind a proxy this needs MNEMO_BEHIND_PROXY (and the proxy
# in MNEMO_TRUSTED_PROXIES), or every request looks like plain HTTP and redirects forever.
SECURE_SSL_REDIRECT = env_bool("MNEMO_SSL_REDIRECT", default=False)
# HSTS: browsers use only HTTPS for this host for that many seconds. 0 (the default) is off;
# turn it on once HTTPS works, e.g. 31536000 (a year). It covers subdomains unless
# MNEMO_HSTS_INCLUDE_SUBDOMAINS=false. Asking for the browsers' preload list is the domain
# owner's decision (it is hard to undo): MNEMO_HSTS_PRELOAD=true.
SECURE_HSTS_SECONDS = env_int("MNEMO_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("MNEMO_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env_bool("MNEMO_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy on every page: scripts and styles only from Mnemo's own static
# files (no inline code; templates/base.html turns off htmx's injected styles and eval).
# The Swagger UI page relaxes styles for itself only (config/urls.py).
SECURE_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
}
# Error answers (lib/http_errors.py): JSON under /api/, styled pages elsewhere; handler400/
# 403/404/500 are set in config/urls.py.
CSRF_FAILURE_VIEW = "lib.http_errors.csrf_failure"
