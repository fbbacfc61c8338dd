"""The SDK's public surface: every name in __all__ resolves, and the list stays sorted and complete."""

import reversi


def test_every_public_name_resolves() -> None:
    for name in reversi.__all__:
        assert getattr(reversi, name) is not None


def test_all_is_sorted_and_names_every_lazy_attribute() -> None:
    assert reversi.__all__ == sorted(reversi.__all__)
    assert set(reversi.__all__) == set(reversi._HOMES) | {"errors"}
