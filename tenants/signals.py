"""What the apps above ``tenants`` hear of people: sent by ``tenants`` inside the transaction of
the change, received by apps that keep something of the user's (``accounts``: API tokens), so
``tenants`` never imports them."""

from django.dispatch import Signal

# ``user_lost_access.send(sender=User, user=..., why=...)``: a user was deactivated, or a group
# sync took away their last membership. What they could use to act (API tokens) goes for good:
# reactivating them, or giving them a team again, revives none of it.
user_lost_access = Signal()
