from monitoring.selectors import unread_notification_count


def notifications(request):
    """The signed-in user's unread notifications, for the count in the navigation."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"unread_notifications": unread_notification_count(user)}
