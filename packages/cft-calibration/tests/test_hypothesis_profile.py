from hypothesis import settings


def test_hypothesis_profile_keeps_no_example_database_and_no_deadline():
    # a database in the package folder replays a stored failure in every later run
    assert settings().database is None
    assert settings().deadline is None
