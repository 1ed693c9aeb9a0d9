"""Tasks reach a gs:// or abfss:// lake through pyarrow with the settings the Hadoop file system
reads, and name the files as pyarrow does; settings pyarrow cannot honour are reported."""

from __future__ import annotations

import os

from lakehouse_engine.sink.azurestore import AzureStore
from lakehouse_engine.sink.gcsstore import KEYFILE_VARIABLE, GcsStore
from lakehouse_engine.sink.objectstore import is_object_store, object_path, store_for, unread_settings
from lakehouse_engine.sink.s3store import S3Store

GS = "spark.hadoop.fs.gs."
AZ = "spark.hadoop.fs.azure."
LAKE = "abfss://lake@acct.dfs.core.windows.net/teams/lake"


def test_object_store_uris_name_the_bucket_or_container_and_key_as_pyarrow_does():
    assert object_path("gs://bucket/lake/bronze/t/") == "bucket/lake/bronze/t"
    assert object_path(f"{LAKE}/bronze/t") == "lake/teams/lake/bronze/t"
    assert object_path("s3a://bucket/lake") == "bucket/lake"
    assert all(is_object_store(u) for u in ("s3a://b/k", "s3://b/k", "gs://b/k", LAKE, "abfs://c@a.dfs.x/k"))
    assert not any(is_object_store(u) for u in ("hdfs://nn/lake", "/data/lake", "file:/data/lake", "wasbs://c@a/k"))


def test_each_scheme_gets_its_own_store():
    assert isinstance(store_for("s3a://b/lake", {}), S3Store)
    assert isinstance(store_for("gs://b/lake", {}), GcsStore)
    assert store_for(LAKE, {}) == AzureStore(account="acct")


def test_a_gcs_lake_is_reached_with_the_connectors_endpoint_and_authentication():
    emulator = GcsStore.from_spark_conf({f"{GS}storage.root.url": "http://127.0.0.1:4443/",
                                         f"{GS}auth.type": "UNAUTHENTICATED", f"{GS}project.id": "p1"})
    assert emulator == GcsStore(endpoint="127.0.0.1:4443", https=False, anonymous=True, project_id="p1")
    assert GcsStore.from_spark_conf({}) == GcsStore()  # Google's own service, the default credentials
    assert GcsStore.from_spark_conf({f"{GS}storage.root.url": "https://storage.googleapis.com/"}) == GcsStore()
    keyed = GcsStore.from_spark_conf({f"{GS}auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE",
                                      f"{GS}auth.service.account.json.keyfile": "/etc/gcp/key.json"})
    assert keyed.keyfile == "/etc/gcp/key.json" and not keyed.anonymous
    # A key file named while another authentication is chosen is not used.
    assert GcsStore.from_spark_conf({f"{GS}auth.service.account.json.keyfile": "/k.json"}).keyfile is None


def test_a_gcs_key_file_reaches_pyarrow_through_googles_default_chain(monkeypatch):
    monkeypatch.setenv(KEYFILE_VARIABLE, "/the/users/own.json")  # recorded, so restored after the test
    GcsStore(endpoint="127.0.0.1:1", https=False, keyfile="/etc/gcp/key.json").filesystem()
    assert os.environ[KEYFILE_VARIABLE] == "/etc/gcp/key.json"


def test_gcs_authentication_pyarrow_cannot_use_is_reported_unread():
    assert unread_settings("gs://b/lake", {f"{GS}auth.type": "APPLICATION_DEFAULT",
                                           f"{GS}storage.root.url": "http://h:1/"}) == []
    assert unread_settings("gs://b/lake", [(f"{GS}auth.type", "ACCESS_TOKEN_PROVIDER"),
                                           (f"{GS}auth.impersonation.service.account", "sa@p.iam"),
                                           (f"{GS}proxy.address", "proxy:3128"),
                                           ("spark.hadoop.fs.s3a.bucket.x.endpoint", "e")]) == [
        f"{GS}auth.type", f"{GS}auth.impersonation.service.account", f"{GS}proxy.address"]


def test_an_azure_lake_takes_the_accounts_own_key_over_the_general_one_and_never_shows_it():
    store = AzureStore.from_spark_conf({f"{AZ}account.key": "general-key",
                                        f"{AZ}account.key.acct.dfs.core.windows.net": "SECRET-KEY"}, LAKE)
    assert store == AzureStore(account="acct", account_key="SECRET-KEY")
    assert "SECRET" not in repr(store)
    other_cloud = AzureStore.from_spark_conf({f"{AZ}account.key": "k"}, "abfss://c@acct.dfs.core.chinacloudapi.cn/x")
    assert (other_cloud.account, other_cloud.cloud, other_cloud.account_key) == ("acct", "core.chinacloudapi.cn", "k")


def test_an_azure_lake_takes_a_service_principal_a_managed_identity_or_a_fixed_sas_token():
    principal = AzureStore.from_spark_conf({
        f"{AZ}account.auth.type": "OAuth",
        f"{AZ}account.oauth.provider.type": "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider",
        f"{AZ}account.oauth2.client.id": "app-id", f"{AZ}account.oauth2.client.secret": "app-secret",
        f"{AZ}account.oauth2.client.endpoint": "https://login.microsoftonline.com/tenant-1/oauth2/token"}, LAKE)
    assert (principal.client_id, principal.client_secret, principal.tenant_id) == ("app-id", "app-secret", "tenant-1")
    assert principal.account_key is None and "app-secret" not in repr(principal)
    identity = AzureStore.from_spark_conf({
        f"{AZ}account.auth.type.acct.dfs.core.windows.net": "OAuth",
        f"{AZ}account.oauth.provider.type": "org.apache.hadoop.fs.azurebfs.oauth2.MsiTokenProvider"}, LAKE)
    assert identity == AzureStore(account="acct")  # pyarrow's default credential finds the identity
    user_assigned = AzureStore.from_spark_conf({
        f"{AZ}account.auth.type": "OAuth", f"{AZ}account.oauth2.client.id": "identity-1",
        f"{AZ}account.oauth.provider.type": "org.apache.hadoop.fs.azurebfs.oauth2.MsiTokenProvider"}, LAKE)
    assert user_assigned.client_id == "identity-1"
    # ABFS needs the client id for a workload identity too; given it alone, pyarrow would ask the
    # VM's identity service instead of using the pod's federated token.
    workload = AzureStore.from_spark_conf({
        f"{AZ}account.auth.type": "OAuth", f"{AZ}account.oauth2.client.id": "app-1",
        f"{AZ}account.oauth.provider.type": "org.apache.hadoop.fs.azurebfs.oauth2.WorkloadIdentityTokenProvider"},
        LAKE)
    assert workload == AzureStore(account="acct")
    sas = AzureStore.from_spark_conf({f"{AZ}account.auth.type": "SAS", f"{AZ}sas.fixed.token": "?sv=1&sig=x"}, LAKE)
    assert sas.sas_token == "sv=1&sig=x" and sas.account_key is None


def test_azure_authentication_pyarrow_cannot_use_is_reported_unread():
    assert unread_settings(LAKE, {f"{AZ}account.key": "k"}) == []
    custom = {f"{AZ}account.auth.type": "OAuth", f"{AZ}account.oauth.provider.type": "com.example.VaultTokens"}
    assert unread_settings(LAKE, custom) == [f"{AZ}account.oauth.provider.type"]
    sas_provider = {f"{AZ}account.auth.type.acct.dfs.core.windows.net": "SAS",
                    f"{AZ}sas.token.provider.type": "com.example.SasTokens"}
    assert unread_settings(LAKE, sas_provider) == [f"{AZ}sas.token.provider.type"]
    assert unread_settings(LAKE, {f"{AZ}account.auth.type": "Custom"}) == [f"{AZ}account.auth.type"]
    # ABFS prefers a SAS token provider to a fixed token.
    both = {f"{AZ}account.auth.type": "SAS", f"{AZ}sas.fixed.token": "sv=1", f"{AZ}sas.token.provider.type": "x.P"}
    assert unread_settings(LAKE, both) == [f"{AZ}sas.token.provider.type"]
    assert unread_settings(LAKE, {f"{AZ}account.auth.type": "SAS", f"{AZ}sas.fixed.token": "sv=1"}) == []
    encrypted = {f"{AZ}account.key": "k", f"{AZ}account.keyprovider.acct.dfs.core.windows.net": "x.ShellKeys"}
    assert unread_settings(LAKE, encrypted) == [f"{AZ}account.keyprovider.acct.dfs.core.windows.net"]
    principal = {f"{AZ}account.auth.type": "OAuth",
                 f"{AZ}account.oauth.provider.type": "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"}
    public = "https://login.microsoftonline.com/tenant-1/oauth2/token"
    assert unread_settings(LAKE, {**principal, f"{AZ}account.oauth2.client.endpoint": public}) == []
    for endpoint in ("https://login.chinacloudapi.cn/tenant-1/oauth2/token", "https://login.microsoftonline.com/"):
        assert unread_settings(LAKE, {**principal, f"{AZ}account.oauth2.client.endpoint": endpoint}) == [
            f"{AZ}account.oauth2.client.endpoint"]
