from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from lib.tool_manifest import api_not_found

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("config.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api_schema"), name="api_docs"),
    re_path(r"^api/", api_not_found),
    # Pages: the Context page (memory), its Documents tab and search, activity, work, agents,
    # account.
    path("", include("memory.urls")),
    path("activity/", include("activity.urls")),
    path("work/", include("work.urls")),
    path("documents/", include("context.urls")),
    path("search/", include("search.urls")),
    path("", include("profiles.urls")),
]
