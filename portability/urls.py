from django.urls import path

from portability import export_views, import_views

urlpatterns = [
    path("settings/export/", export_views.export_download, name="export_download"),
    path("settings/export/prepare/", export_views.export_start, name="export_start"),
    path("settings/export/<int:pk>/", export_views.export_job, name="export_job"),
    path(
        "settings/export/<int:pk>/download",
        export_views.export_job_download,
        name="export_job_download",
    ),
    path("settings/import/", import_views.import_start, name="import_start"),
    path("settings/import/<int:pk>/", import_views.import_job, name="import_job"),
]
