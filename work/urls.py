from django.urls import path

from work import views

urlpatterns = [
    path("", views.work_list_page, name="work_list"),
    path("<int:pk>/", views.work_detail_page, name="work_detail"),
]
