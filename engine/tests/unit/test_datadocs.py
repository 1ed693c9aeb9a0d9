"""Data Docs pages rewritten to read offline: static tables instead of bootstrap-table scripts,
nothing fetched from the network, and a second pass that changes nothing."""

from __future__ import annotations

from pathlib import Path

from lakehouse_engine.quality.datadocs import MARKER, external_references, make_offline

COLUMNS = [
    {"field": "validation_success", "title": "Status"},
    {"field": "run_name", "title": "Run Name"},
    {"field": "run_time", "title": "Run Time", "sortName": "_run_time_sort"},
]
DATA = [
    {"validation_success": '<i class="fas fa-check-circle"></i>', "_validation_success_text": "Success",
     "run_name": "binlog mysql-bin.000001:100", "run_time": "older", "_run_time_sort": 1.0,
     "_table_row_link_path": "validations/a.html"},
    {"validation_success": '<i class="fas fa-times"></i>', "_validation_success_text": "Failed",
     "run_name": "binlog mysql-bin.000001:200", "run_time": "newer", "_run_time_sort": 2.0,
     "_table_row_link_path": "validations/b.html"},
]

# The shape of a GX 1.x index page: CDN assets, a tracking logo, and a table drawn by a script
# from Python-literal columns and rows.
INDEX = """<!DOCTYPE html>
<html>
  <head>
    <link rel="stylesheet" href="https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css"/>
    <style>.navbar-brand a { background: url('https://example.com/logo.png') 0 0 no-repeat; }</style>
<script src="https://code.jquery.com/jquery-3.7.1.min.js"></script>
<script src="//unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js"></script>
  </head>
  <body>
    <img class="NO-CACHE" src="https://great-expectations-web-assets.s3.amazonaws.com/logo-long.png?d=1" alt="GX"/>
    <button class="btn" onclick="clearTableFilters('t1')">Clear Filters</button>
<table
  id="t1"
  class="table-sm"
  data-toggle="table"
>
</table>
<script>
  $('#t1').bootstrapTable(
    Object.assign(
      {
        columns: @COLUMNS@,
        data: @DATA@,
        toolbar: '#t1-toolbar'
      },
      {'search': 'true', 'sortName': 'run_time', 'sortOrder': 'desc'}
    )
  );
</script>
<footer class="alert invisible" id="ge-cta-footer" role="alert"><a href="https://docs.example.com">How to</a></footer>
<footer>
  <p>Stay current on everything GX with our newsletter <a href="https://greatexpectations.io/newsletter?utm_source=datadocs">Subscribe</a></p>
</footer>
  </body>
</html>
""".replace("@COLUMNS@", repr(COLUMNS)).replace("@DATA@", repr(DATA))


def site(tmp_path: Path) -> Path:
    root = tmp_path / "local_site"
    (root / "validations" / "t").mkdir(parents=True)
    (root / "static" / "styles").mkdir(parents=True)
    (root / "index.html").write_text(INDEX)
    (root / "validations" / "t" / "run.html").write_text(INDEX.replace("t1", "t2"))
    (root / "static" / "styles" / "default.css").write_text("a { background: url(https://x.example/y.png); }")
    return root


def test_pages_keep_their_tables_as_html_and_fetch_nothing(tmp_path):
    root = site(tmp_path)
    assert external_references(INDEX)  # the fixture does fetch things
    assert len(make_offline(root)) == 2
    index = (root / "index.html").read_text()
    assert MARKER in index and "<script" not in index and "Clear Filters" not in index
    assert "ge-cta-footer" not in index and "newsletter" not in index and "<footer" not in index
    for path in [*root.rglob("*.html"), *root.rglob("*.css")]:
        assert external_references(path.read_text()) == [], path
    # Rows sorted as the table asked (newest run first), each linked to its page, status as text.
    assert index.index("mysql-bin.000001:200") < index.index("mysql-bin.000001:100")
    assert '<a href="validations/b.html"><i class="fas fa-times"></i>Failed</a>' in index
    assert "<th>Run Name</th>" in index
    # The logo is GX's own copy, relative to each page.
    assert 'src="static/images/logo-long.png"' in index
    assert 'src="../../static/images/logo-long.png"' in (root / "validations" / "t" / "run.html").read_text()


def test_a_second_pass_leaves_rewritten_pages_alone(tmp_path):
    root = site(tmp_path)
    make_offline(root)
    before = {p: p.read_text() for p in root.rglob("*") if p.is_file()}
    assert make_offline(root) == []
    assert {p: p.read_text() for p in root.rglob("*") if p.is_file()} == before


def test_a_missing_site_is_nothing_to_do(tmp_path):
    assert make_offline(tmp_path / "absent") == []
