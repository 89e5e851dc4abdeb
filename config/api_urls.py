"""The agent API, version 1: every app's tools, the manifest, and a JSON 404 for the rest."""

from django.urls import include, path

from lib.tool_manifest import ToolManifestApi, UnknownToolApi

urlpatterns = [
    path("", include("memory.api_urls")),
    path("", include("context.api_urls")),
    path("", include("learning.api_urls")),
    path("", include("briefing.api_urls")),
    path("", include("work.api_urls")),
    path("", include("portability.api_urls")),
    path("tools", ToolManifestApi.as_view(), name="tool_manifest"),
    path("tools/<str:name>", UnknownToolApi.as_view(), name="unknown_tool"),
]
