"""An ``abfss://`` lake (Azure Data Lake Storage) as Spark tasks reach it through pyarrow's
Azure file system (see :mod:`.objectstore`), from the settings Hadoop's ABFS driver reads
(``spark.hadoop.fs.azure.*``), each either for the lake's account
(``fs.azure.account.key.ACCOUNT.dfs.core.windows.net``) or for all accounts:

- ``fs.azure.account.auth.type`` ``SharedKey`` (the default): ``fs.azure.account.key``;
- ``SAS`` with a fixed token: ``fs.azure.sas.fixed.token``;
- ``OAuth``: a service principal (``ClientCredsTokenProvider`` with
  ``fs.azure.account.oauth2.client.id``, ``.client.secret`` and ``.client.endpoint``, whose path
  names the tenant, in Azure's public cloud), or a managed or workload identity
  (``MsiTokenProvider``, ``WorkloadIdentityTokenProvider``), which pyarrow's default credential
  finds itself.

Custom token providers, SAS token providers, key providers (an encrypted key) and a service
principal of another cloud are not read (:func:`unread_settings`). The lake's
host names the account and the cloud: ``container@account.dfs.core.windows.net``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyarrow import fs

SCHEMES = ("abfss", "abfs")
AZURE = "spark.hadoop.fs.azure."
_AZURE_PUBLIC = "core.windows.net"
_IDENTITY_PROVIDERS = ("MsiTokenProvider", "WorkloadIdentityTokenProvider")  # pyarrow's default credential
_MANAGED_IDENTITY = "MsiTokenProvider"
_SERVICE_PRINCIPAL = "ClientCredsTokenProvider"
_PUBLIC_LOGIN = "login.microsoftonline.com"  # where pyarrow's service-principal credential signs in


def account_host(uri: str) -> str:
    """``abfss://container@account.dfs.core.windows.net/path``'s host: the account's endpoint."""
    return urlsplit(uri).netloc.rpartition("@")[2]


class _Settings:
    """ABFS's settings of one account: a key's account-specific form wins over the general one."""

    def __init__(self, conf: Iterable[tuple[str, str]] | Mapping[str, str], host: str):
        items = conf.items() if isinstance(conf, Mapping) else conf
        self._values = {key.removeprefix(AZURE): value for key, value in items if key.startswith(AZURE)}
        self._host = host

    def get(self, name: str) -> str | None:
        value = self._values.get(f"{name}.{self._host}") or self._values.get(name)
        return value.strip() if value else None

    def key_of(self, name: str) -> str:
        return AZURE + (f"{name}.{self._host}" if f"{name}.{self._host}" in self._values else name)

    def auth_type(self) -> str:
        return (self.get("account.auth.type") or "SharedKey").lower()

    def provider(self) -> str:
        return (self.get("account.oauth.provider.type") or "").rsplit(".", 1)[-1]


def unread_settings(conf: Iterable[tuple[str, str]] | Mapping[str, str], uri: str) -> list[str]:
    """The ABFS settings of ``conf`` for ``uri``'s account that pyarrow would not honour: custom
    token providers, a SAS token provider (ABFS prefers it to a fixed token), an encrypted account
    key (a key provider), and a service principal outside Azure's public cloud or without a tenant
    (pyarrow signs in at Microsoft's public login host)."""
    settings = _Settings(conf, account_host(uri))
    auth = settings.auth_type()
    if auth == "sharedkey":
        return [settings.key_of("account.keyprovider")] if settings.get("account.keyprovider") else []
    if auth == "sas":
        if settings.get("sas.token.provider.type") or settings.get("sas.fixed.token") is None:
            return [settings.key_of("sas.token.provider.type")]
        return []
    if auth != "oauth":
        return [settings.key_of("account.auth.type")]
    provider = settings.provider()
    if provider in _IDENTITY_PROVIDERS:
        return []
    if provider == _SERVICE_PRINCIPAL:
        endpoint = urlsplit(settings.get("account.oauth2.client.endpoint") or "")
        if endpoint.hostname != _PUBLIC_LOGIN or not _tenant(endpoint.path):
            return [settings.key_of("account.oauth2.client.endpoint")]
        return []
    return [settings.key_of("account.oauth.provider.type")]


def _tenant(endpoint_path: str) -> str | None:
    """``/TENANT/oauth2/token`` (or ``/TENANT/oauth2/v2.0/token``)'s tenant."""
    return endpoint_path.strip("/").split("/", 1)[0] or None


@dataclass(frozen=True)
class AzureStore:
    """How tasks reach an Azure storage account (pickled into each task: secrets only when the
    project set them in spark.conf, which Spark ships to its executors anyway)."""

    account: str
    cloud: str | None = None  # the endpoints' suffix (core.chinacloudapi.cn...); None: Azure's public cloud
    account_key: str | None = field(default=None, repr=False)
    sas_token: str | None = field(default=None, repr=False)
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    tenant_id: str | None = None
    # An emulator's host:port for both services, over http (Azurite, in tests: ABFS has no such setting).
    emulator: str | None = None

    @classmethod
    def from_spark_conf(cls, conf: Iterable[tuple[str, str]] | Mapping[str, str], uri: str) -> AzureStore:
        """The settings ABFS takes from ``spark.hadoop.fs.azure.*`` for ``uri``'s account."""
        host = account_host(uri)
        account, _, rest = host.partition(".")
        cloud = rest.partition(".")[2] or None  # dfs.core.windows.net -> core.windows.net
        settings = _Settings(conf, host)
        auth = settings.auth_type()
        store = cls(account=account, cloud=None if cloud == _AZURE_PUBLIC else cloud)
        if auth == "sharedkey":
            return replace(store, account_key=settings.get("account.key"))
        if auth == "sas":
            return replace(store, sas_token=(settings.get("sas.fixed.token") or "").lstrip("?") or None)
        if auth == "oauth" and settings.provider() == _SERVICE_PRINCIPAL:
            endpoint = settings.get("account.oauth2.client.endpoint") or ""
            return replace(store, client_id=settings.get("account.oauth2.client.id"),
                           client_secret=settings.get("account.oauth2.client.secret"),
                           tenant_id=_tenant(urlsplit(endpoint).path))
        if auth == "oauth" and settings.provider() == _MANAGED_IDENTITY:
            # Its client id picks a user-assigned identity. Not for a workload identity: given a
            # client id alone pyarrow asks the VM's identity service, not the pod's federated
            # token, which its default credential finds from AKS's AZURE_* variables.
            return replace(store, client_id=settings.get("account.oauth2.client.id"))
        return store

    def filesystem(self) -> fs.AzureFileSystem:
        from pyarrow import fs

        if self.emulator is not None:
            authority: dict[str, str] = {"blob_storage_authority": self.emulator, "blob_storage_scheme": "http",
                                         "dfs_storage_authority": self.emulator, "dfs_storage_scheme": "http"}
        elif self.cloud is not None:
            authority = {"blob_storage_authority": f".blob.{self.cloud}", "dfs_storage_authority": f".dfs.{self.cloud}"}
        else:
            authority = {}
        return fs.AzureFileSystem(self.account, account_key=self.account_key, sas_token=self.sas_token,
                                  client_id=self.client_id, client_secret=self.client_secret,
                                  tenant_id=self.tenant_id, **authority)

