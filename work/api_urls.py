from django.urls import path

from work import apis

urlpatterns = [
    path("tools/create_work", apis.WorkCreateApi.as_view(), name="create_work"),
    path("tools/list_work", apis.WorkListApi.as_view(), name="list_work"),
    path("tools/get_work", apis.WorkGetApi.as_view(), name="get_work"),
    path("tools/update_work", apis.WorkUpdateApi.as_view(), name="update_work"),
]
