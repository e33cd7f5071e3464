# mypy: ignore-errors
# (Django is only in the baseline's own venv; see README.md.)
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = ()
    operations = (
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("invoice", models.IntegerField()),
                ("amount", models.IntegerField()),
            ],
        ),
    )
