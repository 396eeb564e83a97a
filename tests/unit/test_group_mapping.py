"""From a provider's groups to team roles and admin (tenants/group_mapping.py): the setting's
shape, the groups claim's shape, and what a user's groups give. Pure: no database."""

import pytest

from tenants.group_mapping import (
    ROLE_ORDER,
    GroupMappingError,
    GroupRule,
    MalformedGroupsClaim,
    desired_access,
    managed_teams,
    membership_changes,
    parse_group_mapping,
    parse_groups_claim,
)
from tenants.models import Membership

MAPPING = {
    "gpu-vision-leads": {"team": "vision", "role": "lead"},
    "gpu-vision-members": {"team": "vision", "role": "member"},
    "gpu-vision-viewers": {"team": "vision", "role": "viewer"},
    "gpu-nlp-members": {"team": "nlp", "role": "member"},
    "gpu-ghost-members": {"team": "ghost", "role": "member"},
    "gpu-admins": {"admin": True},
}
RULES = parse_group_mapping(MAPPING)
TEAMS = {"vision", "nlp", "speech"}


def test_roles_are_the_membership_roles_most_access_first():
    assert set(ROLE_ORDER) == set(Membership.Role.values)
    assert ROLE_ORDER[0] == Membership.Role.LEAD


def test_a_mapping_reads_as_rules_by_group():
    assert RULES["gpu-vision-leads"] == GroupRule(
        group="gpu-vision-leads", team="vision", role="lead"
    )
    assert RULES["gpu-admins"] == GroupRule(group="gpu-admins", admin=True)
    assert parse_group_mapping({}) == {}


def test_one_group_may_give_a_team_role_and_admin():
    rules = parse_group_mapping({"ops": {"team": "infra", "role": "lead", "admin": True}})
    assert rules["ops"] == GroupRule(group="ops", team="infra", role="lead", admin=True)


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (["gpu-admins"], "must be a JSON object"),
        ({"gpu-x": "vision"}, "OIDC_GROUP_MAPPING['gpu-x']: must be an object"),
        ({"gpu-x": {"team": "vision"}}, "OIDC_GROUP_MAPPING['gpu-x']: 'team' needs a 'role'"),
        ({"gpu-x": {"role": "lead"}}, "OIDC_GROUP_MAPPING['gpu-x']: 'role' needs a 'team'"),
        (
            {"gpu-x": {"team": "vision", "role": "owner"}},
            "OIDC_GROUP_MAPPING['gpu-x']: role 'owner' is not one of lead, member, viewer",
        ),
        ({"gpu-x": {"team": 7, "role": "lead"}}, "'team' must be a team's slug"),
        ({"gpu-x": {"team": " ", "role": "lead"}}, "'team' must be a team's slug"),
        ({"gpu-x": {"admin": "yes"}}, "OIDC_GROUP_MAPPING['gpu-x']: 'admin' must be true or"),
        ({"gpu-x": {"admin": False}}, "OIDC_GROUP_MAPPING['gpu-x']: gives nothing"),
        ({"gpu-x": {}}, "OIDC_GROUP_MAPPING['gpu-x']: gives nothing"),
        ({"gpu-x": {"teem": "vision", "role": "lead"}}, "unknown key(s) 'teem'"),
        ({"": {"admin": True}}, "a group name must be a non-empty string"),
    ],
)
def test_a_malformed_mapping_entry_is_named(mapping, message):
    with pytest.raises(GroupMappingError) as error:
        parse_group_mapping(mapping)
    assert message in str(error.value)


def test_groups_claim_is_a_list_of_names_and_absent_means_none():
    assert parse_groups_claim(["a", "b", "a"]) == ["a", "b"]
    assert parse_groups_claim([]) == []
    assert parse_groups_claim(None) == []


@pytest.mark.parametrize(
    ("claim", "message"),
    [
        ("gpu-vision-leads", "the groups claim is a str, not a list of group names"),
        ({"gpu-vision-leads": True}, "the groups claim is a dict"),
        (7, "the groups claim is a int"),
        (["gpu-vision-leads", 3], "holds 3, which is not a group name"),
        (["gpu-vision-leads", None], "holds None"),
        ([""], "holds '', which is not a group name"),
        ([["nested"]], "holds ['nested']"),
        (["x"] * 1001, "more than 1000 groups"),
    ],
)
def test_a_malformed_groups_claim_is_refused_saying_how(claim, message):
    with pytest.raises(MalformedGroupsClaim) as error:
        parse_groups_claim(claim)
    assert message in str(error.value)


def test_groups_give_their_teams_roles():
    access = desired_access(
        groups=["gpu-vision-leads", "gpu-nlp-members", "unmapped"],
        rules=RULES,
        existing_teams=TEAMS,
    )
    assert access.memberships == {"vision": "lead", "nlp": "member"}
    assert access.sources == {"vision": "gpu-vision-leads", "nlp": "gpu-nlp-members"}
    assert access.admin is False
    assert access.skipped == ()


@pytest.mark.parametrize(
    "groups",
    [
        ["gpu-vision-viewers", "gpu-vision-members", "gpu-vision-leads"],
        ["gpu-vision-leads", "gpu-vision-viewers"],
    ],
)
def test_two_groups_of_one_team_give_the_higher_role(groups):
    access = desired_access(groups=groups, rules=RULES, existing_teams=TEAMS)
    assert access.memberships == {"vision": "lead"}
    assert access.sources == {"vision": "gpu-vision-leads"}


def test_admin_group_gives_admin_and_its_absence_takes_it():
    assert desired_access(groups=["gpu-admins"], rules=RULES, existing_teams=TEAMS).admin is True
    assert desired_access(groups=[], rules=RULES, existing_teams=TEAMS).admin is False


def test_without_an_admin_rule_the_admin_role_is_left_alone():
    rules = parse_group_mapping({"gpu-nlp-members": {"team": "nlp", "role": "member"}})
    assert desired_access(groups=[], rules=rules, existing_teams=TEAMS).admin is None


def test_a_rule_for_a_team_that_does_not_exist_is_skipped_and_said():
    access = desired_access(
        groups=["gpu-ghost-members", "gpu-nlp-members"], rules=RULES, existing_teams=TEAMS
    )
    assert access.memberships == {"nlp": "member"}
    (skipped,) = access.skipped
    assert (skipped.group, skipped.team) == ("gpu-ghost-members", "ghost")
    assert "team 'ghost', which does not exist or is archived" in skipped.reason


def test_unknown_team_of_a_group_the_user_is_not_in_is_not_reported():
    access = desired_access(groups=["gpu-nlp-members"], rules=RULES, existing_teams=TEAMS)
    assert access.skipped == ()


def test_managed_teams_are_those_the_mapping_names():
    assert managed_teams(RULES) == {"vision", "nlp", "ghost"}


def test_changes_add_change_and_remove_only_in_managed_teams():
    changes = membership_changes(
        current={"vision": "member", "nlp": "member", "speech": "lead"},
        desired={"vision": "lead", "infra": "viewer"},
        managed={"vision", "nlp", "infra"},
    )
    assert changes.add == {"infra": "viewer"}
    assert changes.change == {"vision": ("member", "lead")}
    assert changes.remove == {"nlp": "member"}  # speech is not managed: left as it is
    assert changes


def test_no_changes_when_memberships_already_match():
    changes = membership_changes(
        current={"vision": "lead"}, desired={"vision": "lead"}, managed={"vision", "nlp"}
    )
    assert not changes
