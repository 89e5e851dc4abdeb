from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "llm"
    verbose_name = "LLM calls and turns"
