from django.urls import path

from portability import export_views, import_views

urlpatterns = [
    path("settings/export/", export_views.export_download, name="export_download"),
    path("settings/import/", import_views.import_start, name="import_start"),
    path("settings/import/<int:pk>/", import_views.import_job, name="import_job"),
]
