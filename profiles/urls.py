from django.urls import path

from profiles import accounts, views

urlpatterns = [
    path("agents/", views.agents_page, name="agents"),
    path("agents/new/", views.agent_create, name="agent_create"),
    path("agents/<int:agent_id>/tokens/", views.token_create_view, name="token_create"),
    path("agents/tokens/<int:token_id>/revoke/", views.token_revoke_view, name="token_revoke"),
    path("agents/<int:agent_id>/rename/", views.agent_rename, name="agent_rename"),
    path("agents/<int:agent_id>/learning/", views.agent_learning, name="agent_learning"),
    path("agents/<int:agent_id>/read-rules/", views.agent_read_rules, name="agent_read_rules"),
    path("signup/", views.signup, name="signup"),
    # Accounts (profiles/accounts.py): password change and reset by email.
    path("settings/password/", accounts.password_change, name="password_change"),
    path("password-reset/", accounts.password_reset, name="password_reset"),
    path("password-reset/sent/", accounts.password_reset_sent, name="password_reset_done"),
    path(
        "password-reset/<uidb64>/<token>/",
        accounts.password_reset_confirm,
        name="password_reset_confirm",
    ),
    path("password-reset/done/", accounts.password_reset_complete, name="password_reset_complete"),
]
