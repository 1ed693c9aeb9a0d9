"""An object-store lake (``s3a://``, ``gs://``, ``abfss://``) as Spark tasks write to it: through
pyarrow's matching file system, which every executor has (the engine needs it) and which needs
no JVM.

A snapshot's tasks write their files straight into the tables' folders in the bucket (or
container), and the driver commits them from what the tasks report (:mod:`..snapshot.reader`);
in portable mode they write under the lake's ``_staging`` prefix and the driver appends them with
Spark. Either way no executor needs the driver's disk. pyarrow reaches the store from the
settings the Hadoop file system reads (:mod:`.s3store`, :mod:`.gcsstore`, :mod:`.azurestore`);
those it cannot honour are listed by :func:`unread_settings`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from . import azurestore, gcsstore, s3store
from .azurestore import AzureStore
from .gcsstore import GcsStore
from .s3store import S3Store

ObjectStore = S3Store | GcsStore | AzureStore
SCHEMES = (*s3store.SCHEMES, *gcsstore.SCHEMES, *azurestore.SCHEMES)

Conf = Iterable[tuple[str, str]] | Mapping[str, str]


def is_object_store(uri: str) -> bool:
    """Whether ``uri`` is in an object store pyarrow writes (``s3a://``, ``s3://``, ``gs://``,
    ``abfss://``, ``abfs://``)."""
    return urlsplit(uri).scheme in SCHEMES


def object_path(uri: str) -> str:
    """``uri`` as pyarrow names it: ``bucket/key`` (``s3a://bucket/key``, ``gs://bucket/key``), or
    ``container/path`` (``abfss://container@account.dfs.core.windows.net/path``)."""
    parts = urlsplit(uri)
    return f"{parts.netloc.partition('@')[0]}{parts.path}".rstrip("/")


def store_for(uri: str, conf: Conf) -> ObjectStore:
    """How tasks reach ``uri``'s store, from the session's settings ``conf``."""
    scheme = urlsplit(uri).scheme
    if scheme in gcsstore.SCHEMES:
        return GcsStore.from_spark_conf(conf)
    if scheme in azurestore.SCHEMES:
        return AzureStore.from_spark_conf(conf, uri)
    return S3Store.from_spark_conf(conf)


def unread_settings(uri: str, conf: Conf) -> list[str]:
    """The settings of ``conf`` for ``uri``'s store that pyarrow would not honour (the Hadoop
    file system reads them, so only Spark reaches the store as configured)."""
    scheme = urlsplit(uri).scheme
    items = list(conf.items() if isinstance(conf, Mapping) else conf)
    if scheme in gcsstore.SCHEMES:
        return gcsstore.unread_settings(items)
    if scheme in azurestore.SCHEMES:
        return azurestore.unread_settings(items, uri)
    return s3store.unread_settings(items, bucket=urlsplit(uri).netloc)
