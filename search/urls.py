"""The search page, mounted at /search/ (the Context page's search box asks it too)."""

from django.urls import path

from search import views

urlpatterns = [
    path("", views.search_page, name="search"),
]
