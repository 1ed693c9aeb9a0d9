"""Stand-ins for modules a package imports but a run never uses (``quality.deferred``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakehouse_engine.quality.deferred import Deferred, deferring

PACKAGE = "deferral_probe"


@pytest.fixture
def probe(tmp_path: Path) -> Iterator[Path]:
    """A package whose submodule ``heavy`` records in a file each time its code runs, and a module
    ``user`` that imports it the two ways GX imports what it defers."""
    root = tmp_path / PACKAGE
    (root / "heavy").mkdir(parents=True)
    runs = tmp_path / "runs"
    (root / "__init__.py").write_text("")
    (root / "heavy" / "__init__.py").write_text(textwrap.dedent(f"""\
        with open({str(runs)!r}, "a") as f:
            f.write("ran\\n")
        def answer():
            return 42
        """))
    (root / "heavy" / "inner.py").write_text("VALUE = 7\n")
    (root / "user.py").write_text(f"from {PACKAGE} import heavy\nimport {PACKAGE}.heavy as aliased\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield runs
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def runs_of(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def test_importing_under_a_stand_in_does_not_run_the_module_until_an_attribute_is_read(probe: Path) -> None:
    with deferring([f"{PACKAGE}.heavy"]) as placed:
        import deferral_probe.user as user  # type: ignore[import-not-found]

        assert runs_of(probe) == 0
        assert [type(m) for m in placed] == [Deferred]
    assert user.heavy is user.aliased is placed[0]
    assert user.heavy.answer() == 42  # the first read imports the real module
    assert runs_of(probe) == 1
    assert user.heavy.answer() == 42
    assert runs_of(probe) == 1  # once


def test_a_stand_in_nothing_read_is_gone_after_the_block_so_a_later_import_is_the_real_module(probe: Path) -> None:
    with deferring([f"{PACKAGE}.heavy"]) as placed:
        import deferral_probe.user as user  # noqa: F401

    assert f"{PACKAGE}.heavy" not in sys.modules
    import deferral_probe.heavy as heavy  # type: ignore[import-not-found]

    assert not isinstance(heavy, Deferred)
    assert runs_of(probe) == 1
    assert placed[0].answer() == 42  # the stand-in that was bound answers from that same real module
    assert runs_of(probe) == 1


def test_a_submodule_of_a_stand_in_imports_through_the_real_module(probe: Path) -> None:
    with deferring([f"{PACKAGE}.heavy"]):
        from deferral_probe.heavy import inner  # type: ignore[import-not-found]

    assert inner.VALUE == 7
    assert runs_of(probe) == 1
    assert not isinstance(sys.modules[f"{PACKAGE}.heavy"], Deferred)


def test_a_module_not_installed_gets_no_stand_in_and_still_fails_where_it_is_imported(probe: Path) -> None:
    with deferring([f"{PACKAGE}.missing", "no_such_package_anywhere.sub"]) as placed:
        assert placed == []
        with pytest.raises(ModuleNotFoundError):
            import deferral_probe.missing  # type: ignore[import-not-found]  # noqa: F401


def test_a_module_already_imported_is_left_as_it_is(probe: Path) -> None:
    import deferral_probe.heavy as real

    with deferring([f"{PACKAGE}.heavy"]) as placed:
        assert placed == []
        assert sys.modules[f"{PACKAGE}.heavy"] is real


def test_great_expectations_imports_without_scipy_stats_or_altair_and_can_still_use_them() -> None:
    """The background import dq uses: GX's modules load, the deferred ones do not (a process of
    its own, so that this session's imports do not decide it), and GX's own use of them works."""
    code = textwrap.dedent("""\
        import sys
        from lakehouse_engine.quality import gxload
        gxload.load_in_background()
        gxload.loaded()
        import great_expectations.expectations as gxe
        assert gxe.ExpectColumnValuesToBeUnique is not None
        real = [n for n in ("scipy.stats", "scipy.sparse", "altair") if n in sys.modules]
        assert not real, real
        from great_expectations.expectations.core import expect_column_kl_divergence_to_be_less_than as kl
        assert round(kl.stats.entropy([0.5, 0.5], [0.25, 0.75]), 4) == 0.1438
        assert kl.alt.Chart.__name__ == "Chart"
        print("ok")
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
