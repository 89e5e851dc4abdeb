from django.urls import path

from work import views

urlpatterns = [
    path("", views.work_list_page, name="work_list"),
    path("<int:pk>/", views.work_detail_page, name="work_detail"),
    path("<int:pk>/delete/", views.work_delete_page, name="work_delete"),
    path("<int:pk>/restore/", views.work_restore_page, name="work_restore"),
    path("deleted/", views.work_deleted_page, name="work_recently_deleted"),
]
