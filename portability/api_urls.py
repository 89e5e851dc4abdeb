from django.urls import path

from portability.export_api import ExportApi

urlpatterns = [
    path("export", ExportApi.as_view(), name="export_api"),
]
