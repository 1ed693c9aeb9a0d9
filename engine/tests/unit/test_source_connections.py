"""Connections to the source share what pymysql would rebuild for each of them."""

from __future__ import annotations

import ssl

from lakehouse_engine.source.connection import SourceConnection


def test_connections_share_one_tls_context_in_pymysqls_default_mode_and_explicit_settings_get_their_own():
    # pymysql made (and loaded the system's CA bundle into) a context for every connection.
    first, second = SourceConnection(defer_connect=True), SourceConnection(defer_connect=True)
    assert first.ctx is second.ctx and first.ssl and not first._ssl_required  # TLS when the server offers it
    assert first.ctx.verify_mode == ssl.CERT_NONE and not first.ctx.check_hostname  # pymysql's own PREFERRED
    assert first._create_ssl_ctx({"verify_mode": "required"}) is not first.ctx
