# Mnemo production image: gunicorn serves the web app; the same image runs the
# Celery worker and beat and the one-shot migrate job (see docker-compose.yml).
# All configuration comes from environment variables at run time.

FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_PROJECT_ENVIRONMENT=/app/.venv \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1

# uv, pinned to the version the project's uv.lock is made with.
RUN pip install "uv==0.13.9"

WORKDIR /app

# Dependencies first, from the lock file only, so this layer is reused until
# pyproject.toml or uv.lock change. The project itself is not a package
# ([tool.uv] package = false), so there is nothing else to install.
COPY pyproject.toml uv.lock .python-version ./
RUN uv sync --frozen --no-dev --no-install-project

ENV PATH="/app/.venv/bin:$PATH" \
    MNEMO_DATA_DIR=/app/data \
    MNEMO_STATIC_ROOT=/app/staticfiles

# Token counting (lib/tokenizer.py) never downloads at run time: it reads tiktoken's
# encoding files from this cache, filled here while the build has network access.
ENV TIKTOKEN_CACHE_DIR=/app/.tiktoken-cache
RUN python -c "import tiktoken; [tiktoken.get_encoding(name) for name in ('o200k_base', 'cl100k_base')]" \
    && chmod -R a+rX "$TIKTOKEN_CACHE_DIR"

COPY . .

# Static files are collected into the image. The settings need SECRET_KEY and
# DATABASE_URL only to load (with DATABASE_URL unset they would start the
# embedded PostgreSQL); these build-only values exist for this one command and
# are not kept in the image. Nothing connects to the database here.
RUN SECRET_KEY=collectstatic-build-only \
    DATABASE_URL=postgres://build:build@localhost:5432/build \
    MNEMO_DATA_DIR=/tmp/mnemo-build-data \
    python manage.py collectstatic --noinput \
    && rm -rf /tmp/mnemo-build-data

# Run as an unprivileged user that owns only its data directory.
RUN groupadd --system --gid 10001 mnemo \
    && useradd --system --uid 10001 --gid mnemo --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin mnemo \
    && mkdir -p /app/data \
    && chown mnemo:mnemo /app/data
USER 10001:10001

EXPOSE 8000

# gunicorn's ASGI worker (config/gunicorn.conf.py); it takes its worker count from
# WEB_CONCURRENCY.
CMD ["gunicorn", "-c", "config/gunicorn.conf.py", "--bind", "0.0.0.0:8000"]
