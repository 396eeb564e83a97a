"""The signed-in user, with their teams and roles."""

from django.contrib.auth.models import User
from rest_framework import serializers

from tenants.models import Membership, Team
from tenants.permissions import is_portal_admin


class TeamBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["id", "slug", "name"]
        read_only_fields = fields


class MyMembershipSerializer(serializers.ModelSerializer):
    team = TeamBriefSerializer(read_only=True)

    class Meta:
        model = Membership
        fields = ["team", "role"]
        read_only_fields = fields


class MeSerializer(serializers.ModelSerializer):
    is_admin = serializers.SerializerMethodField()
    memberships = MyMembershipSerializer(many=True, read_only=True)

    class Meta:
        model = User
        fields = ["id", "username", "email", "first_name", "last_name", "is_admin", "memberships"]
        read_only_fields = fields

    def get_is_admin(self, user: User) -> bool:
        return is_portal_admin(user)
