import factory
from django.contrib.auth import get_user_model

from memory.models import Memory, Source
from profiles.models import Agent, Profile
from work.models import WorkItem


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    password = factory.PostGenerationMethodCall("set_password", "correct-horse-battery")

    @factory.post_generation
    def save_password(obj, create, extracted, **kwargs):  # noqa: N805
        if create:
            obj.save()


class ProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Profile
        django_get_or_create = ("user",)

    user = factory.SubFactory(UserFactory)


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent

    user = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"agent-{n}")


class MemoryFactory(factory.django.DjangoModelFactory):
    """Inserts rows directly, for reading tests. Writes under test go through services."""

    class Meta:
        model = Memory

    user = factory.SubFactory(UserFactory)
    key = factory.Sequence(lambda n: f"fact:item-{n}")
    value = factory.Faker("sentence")
    source = Source.USER_STATED
    confidence = 1.0


class WorkItemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WorkItem

    user = factory.SubFactory(UserFactory)
    title = factory.Sequence(lambda n: f"Report {n}")
    body = "# Findings\n\n- one\n- two\n"
