"""An ``s3a://`` lake as Spark tasks reach it through pyarrow's S3 file system (see
:mod:`.objectstore`), the way Hadoop's S3A does, from the same settings: the endpoint, region,
path-style access and TLS of ``spark.hadoop.fs.s3a.*``, and keys from there or, like S3A's
default chain, from the environment, the AWS config files or the instance's role. Per-bucket
settings (``fs.s3a.bucket.NAME.*``), assumed roles and custom credential providers are not read
(:func:`unread_settings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyarrow import fs

SCHEMES = ("s3a", "s3")
S3A = "spark.hadoop.fs.s3a."


# Credential providers whose keys pyarrow finds too: in spark.conf, or S3A's default chain.
_PROVIDERS_READ = ("SimpleAWSCredentialsProvider", "TemporaryAWSCredentialsProvider",
                   "EnvironmentVariableCredentialsProvider", "IAMInstanceCredentialsProvider",
                   "DefaultCredentialsProvider", "InstanceProfileCredentialsProvider")


def unread_settings(conf: Iterable[tuple[str, str]] | Mapping[str, str], bucket: str | None = None) -> list[str]:
    """The S3A settings of ``conf`` that pyarrow would not honour: per-bucket ones (``bucket``'s
    only, when given), assumed roles, and credential providers other than the keys and S3A's
    default chain."""
    items = conf.items() if isinstance(conf, Mapping) else conf
    per_bucket = "bucket." if bucket is None else f"bucket.{bucket}."
    unread = []
    for key, value in items:
        name = key.removeprefix(S3A)
        if not key.startswith(S3A):
            continue
        if name.startswith((per_bucket, "assumed.role.")):
            unread.append(key)
        elif name == "aws.credentials.provider":
            providers = [p.strip().rsplit(".", 1)[-1] for p in value.split(",") if p.strip()]
            if any(p not in _PROVIDERS_READ for p in providers):
                unread.append(key)
    return unread


@dataclass(frozen=True)
class S3Store:
    """How tasks reach an S3 bucket (pickled into each task: keys only when the project set them
    in spark.conf, which Spark ships to its executors anyway)."""

    endpoint: str | None = None  # host[:port]; None: AWS's own for the region
    https: bool = True
    region: str | None = None
    path_style: bool = False
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_spark_conf(cls, conf: Iterable[tuple[str, str]] | Mapping[str, str]) -> S3Store:
        """The settings S3A takes from ``spark.hadoop.fs.s3a.*``."""
        items = conf.items() if isinstance(conf, Mapping) else conf
        s3a = {key.removeprefix(S3A): value for key, value in items if key.startswith(S3A)}
        endpoint = s3a.get("endpoint") or None
        https = s3a.get("connection.ssl.enabled", "true").strip().lower() != "false"
        if endpoint is not None and "://" in endpoint:  # S3A takes a URL too; its scheme decides TLS
            parts = urlsplit(endpoint)
            endpoint, https = parts.netloc, parts.scheme == "https"
        return cls(endpoint=endpoint, https=https, region=s3a.get("endpoint.region") or None,
                   path_style=s3a.get("path.style.access", "false").strip().lower() == "true",
                   access_key=s3a.get("access.key") or None, secret_key=s3a.get("secret.key") or None,
                   session_token=s3a.get("session.token") or None)

    def filesystem(self) -> fs.S3FileSystem:
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=self.access_key, secret_key=self.secret_key, session_token=self.session_token,
            region=self.region, endpoint_override=self.endpoint, scheme="https" if self.https else "http",
            force_virtual_addressing=not self.path_style and self.endpoint is None,
        )
