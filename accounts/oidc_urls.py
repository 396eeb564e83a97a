"""Single sign-on's two URLs: off to the provider, and back (``accounts.oidc``)."""

from django.urls import path

from accounts import oidc

urlpatterns = [
    path("authenticate/", oidc.SignInView.as_view(), name="oidc_authentication_init"),
    path("callback/", oidc.CallbackView.as_view(), name="oidc_authentication_callback"),
]
