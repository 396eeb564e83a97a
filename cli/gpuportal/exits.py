"""The exit codes scripts can rely on (the README's table says the same)."""

OK = 0
# A bad option or file, or the API refused the input (400: the message names the field).
BAD_INPUT = 1
# Not signed in, a token that expired or was revoked, a wrong password (401), or not allowed (403).
AUTH = 2
# No such job, team or request, or one you may not see (404).
NOT_FOUND = 3
# The portal cannot be reached, failed (5xx), or asks to try again later (429).
SERVER = 4
# The object's state does not allow it (409): stopping a job that has ended, say.
CONFLICT = 5
# Interrupted (Ctrl-C), as shells count SIGINT.
INTERRUPTED = 130
