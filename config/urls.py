from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from memory import views as memory_views

urlpatterns = [
    path("", memory_views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
