from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.decorators.csp import csp_override
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from lib.tool_manifest import api_not_found

# Swagger UI loads its start-up script from the same URL (?script), so scripts stay 'self'
# only; its page and widgets use inline styles, allowed on this page alone. Its page follows
# the site's theme (templates/api/swagger_ui.html).
SWAGGER_UI_CSP = {**settings.SECURE_CSP, "style-src": ["'self'", "'unsafe-inline'"]}
swagger_view = SpectacularSwaggerSplitView.as_view(
    url_name="api_schema", template_name="api/swagger_ui.html"
)
swagger_ui = csp_override(SWAGGER_UI_CSP)(swagger_view)


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """/favicon.ico, which browsers and tools ask for by habit: the SVG icon every page links."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("config.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/docs/", swagger_ui, name="api_docs"),
    re_path(r"^api/", api_not_found),
    # Pages: those spanning layers (pages/urls.py: the Context page with its Documents tab,
    # search, Settings, activity, the navigation), then each layer's own: the review inbox,
    # its document decisions, work, the reported turns, the heartbeat, agents and accounts,
    # export and import.
    path("", include("pages.urls")),
    path("", include("memory.urls")),
    path("", include("context.urls")),
    path("work/", include("work.urls")),
    path("", include("learning.urls")),
    path("", include("briefing.urls")),
    path("", include("profiles.urls")),
    path("", include("portability.urls")),
]

# Errors: `{"error": …}` JSON under /api/, a styled page elsewhere; a 500 caused by an
# unreachable database is a 503 with Retry-After (lib/http_errors.py).
handler400 = "lib.http_errors.bad_request"
handler403 = "lib.http_errors.permission_denied"
handler404 = "lib.http_errors.page_not_found"
handler500 = "lib.http_errors.server_error"
