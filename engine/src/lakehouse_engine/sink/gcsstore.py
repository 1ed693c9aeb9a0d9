"""A ``gs://`` lake as Spark tasks reach it through pyarrow's GCS file system (see
:mod:`.objectstore`), from the settings Google's Hadoop connector reads (``spark.hadoop.fs.gs.*``,
connector 3.x and later):

- ``fs.gs.storage.root.url``: the service's URL (an emulator's; Google's own when unset);
- ``fs.gs.auth.type``: ``APPLICATION_DEFAULT`` and ``COMPUTE_ENGINE`` (the default) become
  pyarrow's default credentials (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud's, then the metadata
  server), ``SERVICE_ACCOUNT_JSON_KEYFILE`` the key file of
  ``fs.gs.auth.service.account.json.keyfile`` (a path on every host, as for the connector),
  ``UNAUTHENTICATED`` anonymous access;
- ``fs.gs.project.id``.

Other authentication (access-token providers, user credentials, impersonation) and proxies are
not read (:func:`unread_settings`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyarrow import fs

SCHEMES = ("gs",)
GS = "spark.hadoop.fs.gs."
KEYFILE_VARIABLE = "GOOGLE_APPLICATION_CREDENTIALS"
_GOOGLE_ROOT = "storage.googleapis.com"
_AUTH_READ = ("APPLICATION_DEFAULT", "COMPUTE_ENGINE", "SERVICE_ACCOUNT_JSON_KEYFILE", "UNAUTHENTICATED")
_UNREAD_PREFIXES = ("auth.impersonation.", "auth.access.token.provider", "auth.client.", "proxy.")


def _settings(conf: Iterable[tuple[str, str]] | Mapping[str, str]) -> dict[str, str]:
    items = conf.items() if isinstance(conf, Mapping) else conf
    return {key.removeprefix(GS): value for key, value in items if key.startswith(GS)}


def unread_settings(conf: Iterable[tuple[str, str]] | Mapping[str, str]) -> list[str]:
    """The connector's settings of ``conf`` that pyarrow would not honour."""
    unread = []
    for name, value in _settings(conf).items():
        if name.startswith(_UNREAD_PREFIXES):
            unread.append(GS + name)
        elif name == "auth.type" and value.strip().upper() not in _AUTH_READ:
            unread.append(GS + name)
    return unread


@dataclass(frozen=True)
class GcsStore:
    """How tasks reach a GCS bucket (pickled into each task; a key file is named, never read
    on the driver)."""

    endpoint: str | None = None  # host[:port]; None: Google's own
    https: bool = True
    anonymous: bool = False
    keyfile: str | None = None  # a service account's JSON key, at this path on every host
    project_id: str | None = None

    @classmethod
    def from_spark_conf(cls, conf: Iterable[tuple[str, str]] | Mapping[str, str]) -> GcsStore:
        """The settings the connector takes from ``spark.hadoop.fs.gs.*``."""
        gs = _settings(conf)
        endpoint, https = None, True
        root = gs.get("storage.root.url", "").strip()
        if root:
            parts = urlsplit(root if "://" in root else f"https://{root}")
            if parts.netloc != _GOOGLE_ROOT:
                endpoint, https = parts.netloc, parts.scheme != "http"
        auth = gs.get("auth.type", "COMPUTE_ENGINE").strip().upper()
        keyfile = gs.get("auth.service.account.json.keyfile") or None
        return cls(endpoint=endpoint, https=https, anonymous=auth == "UNAUTHENTICATED",
                   keyfile=keyfile if auth == "SERVICE_ACCOUNT_JSON_KEYFILE" else None,
                   project_id=gs.get("project.id") or None)

    def filesystem(self) -> fs.GcsFileSystem:
        from pyarrow import fs

        if self.keyfile is not None:
            # pyarrow's GCS client takes a key file only through Google's default chain, which
            # reads this variable first; a task process serves one project, so setting it is safe.
            os.environ[KEYFILE_VARIABLE] = self.keyfile
        return fs.GcsFileSystem(anonymous=self.anonymous, scheme="https" if self.https else "http",
                                endpoint_override=self.endpoint, project_id=self.project_id)
