import pytest

from tests.factories import AgentFactory, UserFactory


@pytest.fixture
def alice(db):
    return UserFactory(username="alice")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob")


@pytest.fixture
def charlie(db):
    return UserFactory(username="charlie")


@pytest.fixture
def alice_agent(alice):
    return AgentFactory(user=alice, name="assistant")


@pytest.fixture
def superuser(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root", "root@example.com", "admin-pass-1")
