from django.db import migrations
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    """pgvector, for the embedding columns that search adds."""

    dependencies = [("memory", "0001_initial")]

    operations = [VectorExtension()]
