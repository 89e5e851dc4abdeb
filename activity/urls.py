from django.urls import path

from activity import views

urlpatterns = [path("", views.activity_page, name="activity")]
