"""hydra.sweeper.storage and the sweep dir checked before a study exists: a URL SQLAlchemy cannot parse, a
database driver that is not installed, a sqlite file in a directory that is not there, a sweep dir that
cannot be written would otherwise fail inside Optuna's storage (a traceback from sqlalchemy) or after
the study has its first trials (left WAITING).

Follows what optuna.storages.RDBStorage does with the URL (optuna/storages/_rdb/storage.py: SQLAlchemy's
create_engine, whose dialect imports its driver: sqlalchemy/engine/create.py) without connecting.
"""
from __future__ import annotations

from pathlib import Path

from verlsweep.common.errors import Problem
from verlsweep.common.files import writable_dir

KEY = "hydra.sweeper.storage"
SQLITE_FORM = "sqlite:///relative/path.db or sqlite:////absolute/path.db"
# the driver module a dialect imports -> the package that installs it (SQLAlchemy's dialects/*/ name the modules)
DRIVER_PACKAGES = {"psycopg": "'psycopg[binary]'", "psycopg2": "psycopg2-binary", "MySQLdb": "mysqlclient",
                   "pymysql": "PyMySQL"}


def problems(url: str) -> list[Problem]:
    """What stops Optuna from opening `url` (an absolute sqlite URL, verlsweep.study_link.absolute_storage_url),
    found without creating anything."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return [Problem(KEY, url, f"a database URL: {SQLITE_FORM}, or dialect://user:password@host/db")]
    try:
        dialect = parsed.get_dialect()
    except NoSuchModuleError:
        return [Problem(KEY, url, f"a database URL SQLAlchemy knows ({parsed.drivername!r} is not a dialect); "
                                  f"e.g. {SQLITE_FORM}")]
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        module = exc.name or str(exc)
        package = DRIVER_PACKAGES.get(module, module)
        return [Problem(KEY, url, f"a database whose driver is installed ({module} is not): "
                                  f"pip install {package}, or use {SQLITE_FORM}")]
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return []
    if not url.startswith("sqlite:///"):
        return [Problem(KEY, url, f"a sqlite file: {SQLITE_FORM} (three slashes, then the path)")]
    return writable_dir(KEY, url, Path(parsed.database).parent, "the sqlite file's directory", must_exist=True)
