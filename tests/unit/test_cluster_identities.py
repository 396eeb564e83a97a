"""Which usernames can be a cluster identity: the reconcile binds only those."""

import pytest

from tenants.identities import identity_refusal, is_cluster_identity


@pytest.mark.parametrize("username", ["lena", "lena.k@example.com", "zoë", "a-b_c", "x" * 253])
def test_printable_names_without_spaces_or_colons_can_be_identities(username):
    assert is_cluster_identity(username)


@pytest.mark.parametrize(
    "username",
    ["a b", " lena", "lena ", "tab\there", "line\nbreak", "no\u00a0break", "nul\x00", "zero\u200b"],
)
def test_any_whitespace_or_unprintable_character_is_refused(username):
    assert identity_refusal(username) == f"{username!r} has spaces or control characters."


def test_colons_the_system_prefix_and_length_are_refused_with_their_reason():
    assert "keeps for itself" in identity_refusal("system:admin")
    assert "has a ':'" in identity_refusal("team:lena")
    assert "at most 253" in identity_refusal("x" * 254)
    assert identity_refusal("") == "A username is needed."
