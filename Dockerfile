# The base: the public Python image by default; the tests build on one made from Debian's
# packages (devcluster/images.py), which needs only python3, python3-venv and CA certificates.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# A pool of database connections per process (portal/settings.py): no connect per request.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    DJANGO_DEBUG=0 \
    DJANGO_DB_POOL_MAX_SIZE=8 \
    PATH=/opt/venv/bin:$PATH

WORKDIR /app
# Only what the portal runs on (scripts/image_requirements.py), each pinned: --no-deps installs
# nothing unpinned, and pip check fails the build if a pin is missing. In a virtualenv, whatever
# the base: Debian's own Python refuses pip installs into the system's.
COPY requirements-image.txt .
RUN python3 -m venv /opt/venv \
    && pip install --no-deps -r requirements-image.txt \
    && pip check

COPY . .
# collectstatic needs a secret to import settings; the real one comes from the environment.
RUN DJANGO_SECRET_KEY=build-only python manage.py collectstatic --noinput -v0

RUN useradd --system --uid 10001 portal
USER portal
EXPOSE 8000
# ASGI under gunicorn (its own asgi worker): a followed job log streams on the event loop instead
# of holding a worker for minutes (gpujobs/log_follows.py); pages run as before, in threads.
CMD ["gunicorn", "portal.asgi:application", "--worker-class", "asgi", \
     "--bind", "0.0.0.0:8000", "--workers", "3"]
