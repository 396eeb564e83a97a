FROM python:3.11-slim-bookworm

# A pool of database connections per process (portal/settings.py): no connect per request.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    DJANGO_DEBUG=0 \
    DJANGO_DB_POOL_MAX_SIZE=8

WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt

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
