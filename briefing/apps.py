from django.apps import AppConfig


class BriefingConfig(AppConfig):
    name = "briefing"
    verbose_name = "Briefing agents"
