"""The "API tokens" page: a user makes tokens (each shown once), sees them and revokes them."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_POST

from accounts import selectors, services
from accounts.forms import ApiTokenForm


@login_required
def api_tokens(request: HttpRequest) -> HttpResponse:
    created = None
    if request.method == "POST":
        form = ApiTokenForm(request.POST)
        if form.is_valid():
            try:
                token, secret = services.api_token_create(
                    user=request.user,
                    name=form.cleaned_data["name"],
                    lifetime=form.lifetime,
                    scope=form.cleaned_data["scope"],
                )
            except ValidationError as error:
                form.add_error(None, error)
            else:
                # Shown in this answer only: the portal keeps its hash, never the token.
                created = {"token": token, "secret": secret}
                form = ApiTokenForm()
    else:
        form = ApiTokenForm()
    response = render(
        request,
        "accounts/api_tokens.html",
        {"form": form, "created": created, "tokens": selectors.api_tokens_of(request.user)},
    )
    add_never_cache_headers(response)
    return response


@require_POST
@login_required
def api_token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(selectors.api_tokens_of(request.user), pk=pk)
    services.api_token_revoke(token=token)
    messages.success(request, f"Revoked token {token.token_key}…: it no longer works.")
    return redirect("api-tokens")
