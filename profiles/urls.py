from django.urls import path

from profiles import views

urlpatterns = [
    path("agents/", views.agents_page, name="agents"),
    path("agents/new/", views.agent_create, name="agent_create"),
    path("agents/<int:agent_id>/tokens/", views.token_create_view, name="token_create"),
    path("agents/tokens/<int:token_id>/revoke/", views.token_revoke_view, name="token_revoke"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/memory/", views.memory_pause, name="memory_pause"),
    path("signup/", views.signup, name="signup"),
]
