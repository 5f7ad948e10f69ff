import os
from pathlib import Path

from hypothesis import settings


def test_hypothesis_profile_keeps_no_example_database_and_no_deadline():
    # a database in the package folder replays a stored failure in every later run
    assert settings().database is None
    assert settings().deadline is None


def test_hypothesis_storage_is_outside_the_package_folder():
    storage = Path(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"]).resolve()
    package = Path(__file__).resolve().parents[1]
    assert package not in (storage, *storage.parents)
